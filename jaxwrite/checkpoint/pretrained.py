"""Every form a pretrained model comes in, read one way: a Hugging Face directory, a hub id, a jaxwrite
model dir / trainer checkpoint / workdir / step folder, or a llama.cpp GGUF file.

    cfg, model_class = pretrained_config(spec)            # the architecture, from the checkpoint's own config
    model = load_pretrained(spec, mesh=mesh)              # its weights, streamed into their shardings
    tokenizer_path = pretrained_tokenizer_path(spec)      # the tokenizer that came with it, if any

`jaxwrite train` (`model.init_from`), `compile`, `convert`, `model info` and `load_for_inference` (generate,
serve, every local judge) all take these forms through here.
"""
from __future__ import annotations

import glob
import os

from jax.sharding import Mesh

from jaxwrite.checkpoint.model_dir import (CONFIG_FILE, is_model_dir, load_model_from_checkpoint, read_model_config,
                                           tokenizer_dir_of)
from jaxwrite.common import InputError
from jaxwrite.common.gguf_file import is_gguf_path
from jaxwrite.common.hub import resolve_pinned, resolve_pretrained
from jaxwrite.models import ModelConfig
from jaxwrite.parallel import DEFAULT_RULES

HF, GGUF, JAXWRITE = "hf", "gguf", "jaxwrite"
_EXPECTED = ("expected a Hugging Face config.json (+ *.safetensors) here, jaxwrite's model_config.json here, in "
             "checkpoints/ (a trainer workdir) or in the parent of a step folder, a hub id (ORG/NAME), or a .gguf file")


def is_hf_dir(path: str) -> bool:
    """A Hugging Face dir has config.json and no model_config.json (jaxwrite's)."""
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")) and not any(
        os.path.exists(os.path.join(path, *p, CONFIG_FILE)) for p in ((), ("checkpoints",), ("..",)))


def resolve_source(spec: str | os.PathLike, *, field: str | None = None,
                   config_only: bool = False) -> tuple[str, str]:
    """(local path, kind): a hub id resolves to its snapshot (only config.json when `config_only`)."""
    spec = resolve_pinned(os.fspath(spec))
    if is_gguf_path(spec):
        path = os.path.abspath(os.path.expanduser(spec))
        if not os.path.isfile(path):
            raise InputError("GGUF file not found; " + _EXPECTED, path=path, field=field)
        return path, GGUF
    files = {"files": ("config.json",)} if config_only else {}
    path = os.path.abspath(resolve_pretrained(spec, field=field, **files))
    if not os.path.exists(path):
        raise InputError("model not found; " + _EXPECTED, path=path, field=field)
    if is_hf_dir(path):
        return path, HF
    if is_model_dir(path):
        return path, JAXWRITE
    raise InputError("not a model; " + _EXPECTED, path=path, field=field)


def pretrained_config(spec: str | os.PathLike, *, field: str | None = None) -> tuple[ModelConfig, str]:
    """(ModelConfig, model class name) from the checkpoint's own config, reading no weights (a hub id
    fetches config.json only)."""
    path, kind = resolve_source(spec, field=field, config_only=True)
    if kind == GGUF:
        from jaxwrite.common.gguf_file import open_gguf
        from jaxwrite.models.gguf_config import config_from_gguf
        return config_from_gguf(open_gguf(path)), "transformer"
    if kind == HF:
        from jaxwrite.models.hf_config import config_from_hf, read_hf_config
        hf = read_hf_config(path)
        reward = any(a.endswith("ForSequenceClassification") for a in hf.get("architectures") or [])
        return config_from_hf(hf, source=os.path.join(path, "config.json")), "reward_model" if reward else "transformer"
    return read_model_config(path)


def load_pretrained(spec: str | os.PathLike, *, mesh: Mesh | None = None, rules=DEFAULT_RULES,
                    dtype: str | None = None, field: str | None = None, reward_model: bool | None = None):
    """The model a checkpoint holds (Transformer, or RewardModel for a `*ForSequenceClassification` dir
    or a jaxwrite reward model), weights streamed onto `mesh`. `dtype` applies to HF and GGUF imports; a
    jaxwrite checkpoint restores in the dtype it was saved in. `reward_model` forces how an HF dir is
    read (None: by its architectures)."""
    path, kind = resolve_source(spec, field=field)
    if kind == GGUF:
        from jaxwrite.models.gguf_io import load_gguf
        return load_gguf(path, dtype=dtype, mesh=mesh, rules=rules)
    if kind == HF:
        from jaxwrite.models import load_hf
        if not glob.glob(os.path.join(path, "*.safetensors")):
            raise InputError("no *.safetensors weights beside config.json; " + _EXPECTED, path=path, field=field)
        return load_hf(path, dtype=dtype, mesh=mesh, rules=rules, reward_model=reward_model)
    if not _has_weights(path):
        raise InputError("model_config.json here but no weights (model/ or a step folder); " + _EXPECTED,
                         path=path, field=field)
    return load_model_from_checkpoint(path, mesh=mesh, rules=rules)[0]


def _has_weights(path: str) -> bool:
    """Whether a jaxwrite model dir or checkpoint root (here or in checkpoints/) holds weights: model/ or a
    step folder (a step folder named itself is left to the checkpointer)."""
    for root in (path, os.path.join(path, "checkpoints")):
        if os.path.isfile(os.path.join(root, CONFIG_FILE)):
            return os.path.isdir(os.path.join(root, "model")) or any(n.isdigit() for n in os.listdir(root))
    return True


def pretrained_tokenizer_path(spec: str | os.PathLike, *, field: str | None = None) -> str | None:
    """Where the checkpoint's own tokenizer is: the HF dir, the GGUF file, or a jaxwrite model's
    tokenizer/ copy; None when it has none."""
    path, kind = resolve_source(spec, field=field)
    if kind == GGUF:
        from jaxwrite.common.gguf_file import open_gguf
        return path if "tokenizer.ggml.tokens" in open_gguf(path).metadata else None
    if kind == HF:
        return path if any(os.path.exists(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer.model")) \
            else None
    return tokenizer_dir_of(path)

