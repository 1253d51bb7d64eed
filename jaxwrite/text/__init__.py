"""Text handling: tokenizers behind one interface, chat templates, word counting, the
<think>/<answer> protocol and length requests in prompts."""
from jaxwrite.text._chat_template import default_chat_template, render_chat_template
from jaxwrite.text._gguf_tokenizer import gguf_tokenizer
from jaxwrite.text._hf_tokenizer import HFTokenizer
from jaxwrite.text._length_request import LengthRequest, length_range_for, parse_length_request
from jaxwrite.text._loading import load_tokenizer
from jaxwrite.text._sp_tokenizer import SentencePieceTokenizer
from jaxwrite.text._sp_train import CHAT_SPECIAL_TOKENS, train_sentencepiece
from jaxwrite.text._stream import StreamDecoder
from jaxwrite.text._think_answer import (
    ANSWER_CLOSE,
    ANSWER_EXTRACTION_MODES,
    ANSWER_OPEN,
    STOP_STRING,
    THINK_CLOSE,
    THINK_OPEN,
    ExtractedAnswer,
    ThinkAnswer,
    extract_answer,
    has_answer_tags,
    parse_think_answer,
    resolve_answer_extraction,
    strip_think_for_judge,
    think_answer_base_prompt,
    think_answer_fields,
    think_answer_messages,
    think_answer_user_turn,
)
from jaxwrite.text._tokenizer import Tokenizer
from jaxwrite.text._words import count_words

__all__ = [
    "Tokenizer",
    "HFTokenizer",
    "SentencePieceTokenizer",
    "load_tokenizer",
    "gguf_tokenizer",
    "train_sentencepiece",
    "CHAT_SPECIAL_TOKENS",
    "StreamDecoder",
    "default_chat_template",
    "render_chat_template",
    "count_words",
    "THINK_OPEN",
    "THINK_CLOSE",
    "ANSWER_OPEN",
    "ANSWER_CLOSE",
    "STOP_STRING",
    "ThinkAnswer",
    "parse_think_answer",
    "strip_think_for_judge",
    "ANSWER_EXTRACTION_MODES",
    "ExtractedAnswer",
    "extract_answer",
    "has_answer_tags",
    "resolve_answer_extraction",
    "think_answer_user_turn",
    "think_answer_messages",
    "think_answer_base_prompt",
    "think_answer_fields",
    "LengthRequest",
    "parse_length_request",
    "length_range_for",
]
