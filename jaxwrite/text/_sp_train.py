"""Trains a SentencePiece tokenizer for small-scale runs and writes it as a jaxwrite tokenizer dir.

Output (`out_dir`): tokenizer.model, tokenizer_config.json (named special tokens, the ChatML chat
template, the training options) and generation_config.json (EOS ids), so `load_tokenizer(out_dir)`
gives the same interface as a Hugging Face checkpoint.
"""
from __future__ import annotations

import io
import json
import os
import re
from typing import Iterable, Iterator, Mapping

import numpy as np
import sentencepiece as spm

from jaxwrite.common.errors import InputError
from jaxwrite.text._chat_template import default_chat_template
from jaxwrite.text._loading import SP_MODEL_FILE
from jaxwrite.text._sp_tokenizer import SentencePieceTokenizer
from jaxwrite.text._tokenizer_files import GENERATION_CONFIG, TOKENIZER_CONFIG

UNK, PAD = "<unk>", "<pad>"
END_OF_TEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
# User-defined pieces: matched verbatim in text, so chat markup is one id each. Ids follow <unk>, <pad>.
CHAT_SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)
# The LongWriter-Zero protocol tags, one id each too (ordinary text, kept when decoding): corpora rarely
# contain "<" or ">", so without this each tag would be five or six byte-fallback pieces.
PROTOCOL_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
MODEL_TYPES = ("bpe", "unigram")
MIN_CHARACTER_COVERAGE = 0.98   # SentencePiece's own lower bound


class _Sentences:
    """Non-empty lines of the files; lines over `max_bytes` UTF-8 bytes are cut into pieces rather
    than dropped (SentencePiece would skip them). SentencePiece turns an exception raised while it
    iterates into a bare RuntimeError, so a bad file stops the iteration and is kept in `error`."""

    def __init__(self, files: list[str], max_bytes: int):
        self.files, self.max_bytes = files, max_bytes
        self.error: InputError | None = None

    def __iter__(self) -> Iterator[str]:
        for path in self.files:
            with open(path, "rb") as f:  # decoded line by line so a bad byte is reported on its own line
                for lineno, raw in enumerate(f, start=1):
                    try:
                        line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
                    except UnicodeDecodeError:
                        self.error = InputError("expected UTF-8 text", path=path, line=lineno)
                        return
                    while line:
                        piece = line.encode("utf-8")[:self.max_bytes].decode("utf-8", errors="ignore")
                        yield piece
                        line = line[len(piece):]


def _count(sentences: _Sentences) -> int:
    """How many sentences the files give; a bad file is raised here, before any training."""
    count = sum(1 for _ in sentences)
    if sentences.error is not None:
        raise sentences.error
    return count


def _sample_positions(count: int, size: int, seed: int) -> np.ndarray | None:
    """Sorted positions of the `size` sentences kept out of `count` (None: keep all), drawn from `seed`.

    Sampled here, not by SentencePiece: its sampler (shuffle_input_sentence with input_sentence_size
    exceeded) ignores set_random_generator_seed, so each process trained on a different sample and
    two runs of one config got different tokenizers (issue 14).
    """
    if size <= 0 or count <= size:
        return None
    return np.sort(np.random.default_rng(seed).choice(count, size=size, replace=False))


def _kept(sentences: Iterable[str], positions: np.ndarray | None) -> Iterator[str]:
    """The sentences at `positions` (all when None), in file order."""
    if positions is None:
        yield from sentences
        return
    wanted = iter(positions.tolist())
    target = next(wanted)
    for position, sentence in enumerate(sentences):
        if position == target:
            yield sentence
            target = next(wanted, None)
            if target is None:
                return


def _training_error(message: str, names: Mapping[str, str]) -> InputError:
    """SentencePiece's failure as one line whose advice names the caller's settings (`names`: parameter ->
    what the user types, e.g. "--vocab-size"), not SentencePiece's own command-line flags."""
    last = message.strip().splitlines()[-1] if message.strip() else message
    vocab, coverage = names.get("vocab_size", "vocab_size"), names.get("character_coverage", "character_coverage")
    high = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", last)
    if high:
        return InputError(f"SentencePiece training failed: vocabulary size {high[1]} is more than these texts "
                          f"give pieces for; set {vocab} to at most {high[2]}, or train on more text")
    low = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", last)
    if low:
        return InputError(f"SentencePiece training failed: vocabulary size {low[1]} is below the {low[2]} "
                          f"pieces these texts need (256 byte pieces, the special tokens, the characters "
                          f"covered); raise {vocab} to {low[2]} or more, or lower {coverage} (not below "
                          f"{MIN_CHARACTER_COVERAGE})")
    last = re.sub(r"^\w+: \S+\(\d+\) \[.*?\] ", "", last)   # drop "INTERNAL: file.cc(N) [check] "
    return InputError(f"SentencePiece training failed: {last}")


def train_sentencepiece(files: list[str], out_dir: str, vocab_size: int, *, model_type: str = "bpe",
                        character_coverage: float = 0.9995, max_sentence_length: int = 8192,
                        input_sentence_size: int = 200_000, byte_fallback: bool = True, seed: int = 0,
                        num_threads: int = 1, option_names: Mapping[str, str] | None = None
                        ) -> SentencePieceTokenizer:
    """Trains on the lines of `files` and writes a tokenizer directory; returns it loaded.

    Text is kept exactly (identity normalisation, no whitespace folding, no dummy prefix space), so
    decode(encode(text)) == text, newlines and runs of spaces included; unseen characters fall back
    to bytes. At most `input_sentence_size` lines are sampled, with a numpy generator seeded by `seed`.
    Byte-identical output for fixed inputs, `seed` and `num_threads`, in any process (one thread by
    default: unigram's EM sums in thread order). `option_names` maps "vocab_size" / "character_coverage"
    to the flags or config keys the caller's user sets, for the advice of a failed training.
    """
    if model_type not in MODEL_TYPES:
        raise InputError(f"model type '{model_type}': expected one of {', '.join(MODEL_TYPES)}")
    if not files:
        raise InputError("expected at least one training text file")
    for path in files:
        if not os.path.isfile(path):
            raise InputError("training text file not found", path=path)
    names = option_names or {}
    if not MIN_CHARACTER_COVERAGE <= character_coverage <= 1.0:
        raise InputError(f"{names.get('character_coverage', 'character_coverage')} {character_coverage}: expected "
                         f"{MIN_CHARACTER_COVERAGE} to 1.0 (SentencePiece's range)")
    if max_sentence_length < 16:
        raise InputError(f"max_sentence_length {max_sentence_length}: expected at least 16 bytes")
    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    sentences = _Sentences(list(files), max_sentence_length)
    count = _count(sentences)
    positions = _sample_positions(count, input_sentence_size, seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_kept(sentences, positions),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            max_sentence_length=max_sentence_length,
            # The sample is drawn above (see _sample_positions): SentencePiece takes every sentence given.
            input_sentence_size=0,
            shuffle_input_sentence=False,
            byte_fallback=byte_fallback,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            add_dummy_prefix=False,
            allow_whitespace_only_pieces=True,
            split_digits=True,
            unk_id=0, pad_id=1, bos_id=-1, eos_id=-1, unk_piece=UNK, pad_piece=PAD,
            user_defined_symbols=list(CHAT_SPECIAL_TOKENS + PROTOCOL_TAGS),
            num_threads=num_threads,
            minloglevel=2,
        )
    except RuntimeError as e:
        raise sentences.error or _training_error(str(e), names) from None
    if sentences.error is not None:
        raise sentences.error

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, SP_MODEL_FILE), "wb") as f:
        f.write(model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    config = {
        "tokenizer_class": "jaxwrite.SentencePieceTokenizer",
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": PAD,
        "unk_token": UNK,
        "additional_special_tokens": list(CHAT_SPECIAL_TOKENS),
        "chat_template": default_chat_template(),
        "jaxwrite_training": {
            "files": [os.path.basename(p) for p in files], "vocab_size": vocab_size, "model_type": model_type,
            "character_coverage": character_coverage, "max_sentence_length": max_sentence_length,
            "input_sentence_size": input_sentence_size, "byte_fallback": byte_fallback, "seed": seed,
            "num_threads": num_threads,
            # How the training sentences were chosen (SentencePiece's own shuffle/sampling is off).
            "sentences": count, "sampled_sentences": count if positions is None else len(positions),
            "sampling": "numpy default_rng(seed) without replacement, in file order",
        },
    }
    generation = {"eos_token_id": [processor.PieceToId(IM_END), processor.PieceToId(END_OF_TEXT)],
                  "pad_token_id": processor.pad_id()}
    for name, content in ((TOKENIZER_CONFIG, config), (GENERATION_CONFIG, generation)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(content, f, ensure_ascii=False, indent=2)
            f.write("\n")
    return SentencePieceTokenizer(os.path.join(out_dir, SP_MODEL_FILE))
