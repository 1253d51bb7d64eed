"""`load_for_inference(path)`: a model and its tokenizer from a Hugging Face dir or hub id, a jaxwrite
checkpoint, or a llama.cpp GGUF file."""
from __future__ import annotations

import os

from jaxwrite.common import InputError


def load_for_inference(path: str | os.PathLike, mesh=None, dtype: str | None = None):
    """Returns (model, tokenizer).

    `path` may be a Hugging Face hub id (ORG/NAME[@REVISION]), read from the hub cache or downloaded
    (jaxwrite.common.hub); a directory with config.json and *.safetensors (a Hugging Face checkpoint, the
    tokenizer from the same directory); one with model_config.json (a jaxwrite model dir, trainer
    checkpoint root or workdir, the tokenizer copy stored beside it); or a `.gguf` file (weights
    dequantized, tokenizer and chat template from its metadata; the file is read once for both).
    """
    from jaxwrite.checkpoint.pretrained import GGUF, load_pretrained, pretrained_tokenizer_path, resolve_source
    from jaxwrite.text import load_tokenizer

    resolved, kind = resolve_source(path)
    if kind == GGUF:
        from jaxwrite.common.gguf_file import open_gguf
        from jaxwrite.models.gguf_io import load_gguf
        from jaxwrite.text import gguf_tokenizer
        gfile = open_gguf(resolved)
        return load_gguf(gfile, dtype=dtype, mesh=mesh), gguf_tokenizer(gfile)
    model = load_pretrained(resolved, mesh=mesh, dtype=dtype, reward_model=False)
    tokenizer_path = pretrained_tokenizer_path(resolved)
    if tokenizer_path is None:
        raise InputError("the model has no tokenizer beside it (tokenizer.json in a Hugging Face dir, tokenizer/ "
                         "in a jaxwrite checkpoint); expected one", path=resolved)
    return model, load_tokenizer(tokenizer_path)
