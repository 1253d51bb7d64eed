"""`load_for_inference(path)`: a model and its tokenizer from a Hugging Face dir or a jaxwrite checkpoint."""
from __future__ import annotations

import glob
import os

from jaxwrite.common import InputError


def load_for_inference(path: str | os.PathLike, mesh=None, dtype: str | None = None):
    """Returns (model, tokenizer).

    `path` may also be a Hugging Face hub id (ORG/NAME[@REVISION]), read from the hub cache or
    downloaded (jaxwrite.common.hub). A directory with config.json and *.safetensors is read as a Hugging Face
    checkpoint (tokenizer
    from the same directory); one with model_config.json (a jaxwrite model dir, trainer checkpoint
    root or workdir) through jaxwrite.checkpoint, with the tokenizer copy stored beside it.
    """
    from jaxwrite.common.hub import resolve_pretrained
    from jaxwrite.text import load_tokenizer
    path = resolve_pretrained(os.fspath(path))   # ORG/NAME (a hub id that is not a local path) -> its snapshot
    if not os.path.isdir(path):
        raise InputError("model not found: expected a Hugging Face directory or a jaxwrite checkpoint", path=path)
    if os.path.isfile(os.path.join(path, "config.json")) and glob.glob(os.path.join(path, "*.safetensors")):
        from jaxwrite.models import load_hf
        model = load_hf(path, dtype=dtype, mesh=mesh, reward_model=False)
        return model, load_tokenizer(path)
    from jaxwrite.checkpoint import load_model_from_checkpoint, tokenizer_dir_of
    model, _ = load_model_from_checkpoint(path, mesh=mesh)
    tokenizer_dir = tokenizer_dir_of(path)
    if tokenizer_dir is None:
        raise InputError("checkpoint has no tokenizer/ copy; save it with a tokenizer_dir", path=path)
    return model, load_tokenizer(tokenizer_dir)
