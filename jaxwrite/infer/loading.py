"""`load_for_inference(path)`: a model and its tokenizer from a Hugging Face dir or a jaxwrite checkpoint."""
from __future__ import annotations

import glob
import os

from jaxwrite.common import InputError


MODEL_DIR_HOLDS = ("expected a model dir: a Hugging Face one (config.json, the *.safetensors weights and the "
                   "tokenizer files) or a jaxwrite one (model_config.json, model/ weights, tokenizer/; also a "
                   "trainer workdir holding checkpoints/model_config.json, or one of its step folders); "
                   "`jaxwrite convert` writes either")


def _has_weights(path: str) -> bool:
    """Whether a jaxwrite model dir or checkpoint root (here or in checkpoints/) holds weights: model/ or a
    step folder (a step folder given itself is left to the checkpointer)."""
    for root in (path, os.path.join(path, "checkpoints")):
        if os.path.isfile(os.path.join(root, "model_config.json")):
            return os.path.isdir(os.path.join(root, "model")) or any(n.isdigit() for n in os.listdir(root))
    return True


def _what_is_missing(path: str) -> str:
    if os.path.isfile(os.path.join(path, "config.json")):
        other = sorted(os.path.basename(p) for ext in ("*.bin", "*.pt")
                       for p in glob.glob(os.path.join(path, ext)))
        found = f" (found {other[0]}: save the weights as safetensors first)" if other else ""
        return f"config.json here but no *.safetensors weights{found}"
    if not _has_weights(path):
        return "model_config.json here but no weights (model/ or a step folder)"
    return "no config.json or model_config.json here"


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
        raise InputError(f"model not found: {MODEL_DIR_HOLDS}", path=path)
    if os.path.isfile(os.path.join(path, "config.json")) and glob.glob(os.path.join(path, "*.safetensors")):
        from jaxwrite.models import load_hf
        model = load_hf(path, dtype=dtype, mesh=mesh, reward_model=False)
        return model, load_tokenizer(path)
    from jaxwrite.checkpoint import load_model_from_checkpoint, tokenizer_dir_of
    from jaxwrite.checkpoint.model_dir import is_model_dir
    if not is_model_dir(path) or not _has_weights(path):
        raise InputError(f"{_what_is_missing(path)}; {MODEL_DIR_HOLDS}", path=path)
    model, _ = load_model_from_checkpoint(path, mesh=mesh)
    tokenizer_dir = tokenizer_dir_of(path)
    if tokenizer_dir is None:
        raise InputError("checkpoint has no tokenizer/ copy; save it with a tokenizer_dir", path=path)
    return model, load_tokenizer(tokenizer_dir)
