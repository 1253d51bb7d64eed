"""`load_tokenizer(path)`: picks the backend from what the path holds."""
from __future__ import annotations

import os

from jaxwrite.common.errors import InputError
from jaxwrite.common.gguf_file import is_gguf_path
from jaxwrite.text._hf_tokenizer import HFTokenizer
from jaxwrite.text._sp_tokenizer import SentencePieceTokenizer
from jaxwrite.text._tokenizer import Tokenizer

HF_TOKENIZER_FILE = "tokenizer.json"
SP_MODEL_FILE = "tokenizer.model"


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Loads a tokenizer from a directory or a single file.

    A directory holding `tokenizer.json` is read as a Hugging Face tokenizer (preferred when a
    `tokenizer.model` is also there, as transformers prefers the fast tokenizer); one holding
    `tokenizer.model` as SentencePiece. A file path is read by its name: `*.model` SentencePiece,
    `*.json` tokenizer.json, `*.gguf` the tokenizer a llama.cpp GGUF file describes. The JSON/Jinja
    settings are read from the same directory (a GGUF file holds its own).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        hf_file, sp_file = os.path.join(path, HF_TOKENIZER_FILE), os.path.join(path, SP_MODEL_FILE)
        if os.path.isfile(hf_file):
            return HFTokenizer(hf_file)
        if os.path.isfile(sp_file):
            return SentencePieceTokenizer(sp_file)
        raise InputError(f"expected a tokenizer directory holding {HF_TOKENIZER_FILE} or {SP_MODEL_FILE}", path=path)
    if not os.path.exists(path):
        raise InputError("tokenizer not found: expected a directory, a .model file or a tokenizer.json", path=path)
    if is_gguf_path(path):
        from jaxwrite.text._gguf_tokenizer import gguf_tokenizer
        return gguf_tokenizer(path)
    if path.endswith(".model"):
        return SentencePieceTokenizer(path)
    if path.endswith(".json"):
        return HFTokenizer(path)
    raise InputError("expected a SentencePiece .model file, a Hugging Face tokenizer.json or a GGUF file", path=path)
