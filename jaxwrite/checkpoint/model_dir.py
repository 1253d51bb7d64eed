"""Model directories other commands load: `model_config.json` beside Orbax arrays (+ the tokenizer).

Two layouts carry a `model_config.json`:
  * a model dir from `save_model_dir`:  model_config.json, model/ (Orbax arrays), tokenizer/ (optional)
  * a trainer checkpoint root:          model_config.json, tokenizer/, <step>/{model,opt,meta}
`load_model_from_checkpoint` reads either (or a trainer workdir holding `checkpoints/`), so
`jaxwrite serve / generate / convert` use trainer output directly.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil

import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh

from jaxwrite.checkpoint._trees import abstract_target, check_matches, to_pure
from jaxwrite.checkpoint.manager import Checkpointer
from jaxwrite.common import InputError
from jaxwrite.common.gguf_file import is_gguf_path
from jaxwrite.models import LoRASpec, ModelConfig, RewardModel, RopeScaling, Transformer, add_lora, merge_lora
from jaxwrite.parallel import DEFAULT_RULES

CONFIG_FILE = "model_config.json"
_LORA_KEY = "lora"
TOKENIZER_DIR = "tokenizer"
MODEL_CLASSES = {"transformer": Transformer, "reward_model": RewardModel}
_WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.bin.index.json", "*.pt", "*.pth",
                 "*.gguf", "*.ckpt", "*.h5", "*.msgpack")


def model_class_name(model: nnx.Module) -> str:
    for name, cls in MODEL_CLASSES.items():
        if type(model) is cls:
            return name
    raise TypeError(f"cannot save a {type(model).__name__}; expected one of {sorted(MODEL_CLASSES)}")


def write_model_config(directory: str, cfg: ModelConfig, model_class: str = "transformer",
                       lora: LoRASpec | None = None) -> str:
    """Writes `model_config.json` (ModelConfig fields + model_class, + the adapters of a LoRA run's
    checkpoints) into `directory`."""
    os.makedirs(directory, exist_ok=True)
    record = {"model_class": model_class, **dataclasses.asdict(cfg)}
    if lora is not None:
        record[_LORA_KEY] = lora.to_dict()
    path = os.path.join(directory, CONFIG_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
    os.replace(tmp, path)
    return path


def read_model_config(directory: str) -> tuple[ModelConfig, str]:
    """(ModelConfig, model_class) of a model dir, trainer checkpoint root, trainer workdir or `<step>`
    folder (the layouts `load_model_from_checkpoint` reads), with one-line errors."""
    return _read_config(directory)[:2]


def _read_config(directory: str) -> tuple[ModelConfig, str, LoRASpec | None]:
    """(ModelConfig, model_class, the adapters a LoRA run's checkpoints carry or None), from one read of
    model_config.json."""
    path = os.path.join(_resolve_root(directory)[0], CONFIG_FILE)
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    model_class = record.pop("model_class", "transformer")
    lora = _lora_of(record.pop(_LORA_KEY, None), path)
    if model_class not in MODEL_CLASSES:
        raise InputError(f"expected one of {sorted(MODEL_CLASSES)}, found '{model_class}'",
                         path=path, field="model_class")
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(record) - known)
    if unknown:
        raise InputError("not a ModelConfig field", path=path, field=unknown[0])
    if record.get("rope_scaling") is not None:
        record["rope_scaling"] = RopeScaling(**record["rope_scaling"])
    try:
        return ModelConfig(**record), model_class, lora
    except (TypeError, ValueError) as err:
        raise InputError(str(err), path=path) from None


def _lora_of(record, path: str) -> LoRASpec | None:
    if record is None:
        return None
    if not isinstance(record, dict):
        raise InputError("expected an object (rank, alpha, targets, base_dtype)", path=path, field=_LORA_KEY)
    return LoRASpec.parse(record.get("rank"), record.get("alpha"), record.get("targets", ()),
                          record.get("base_dtype", "bfloat16"), field=_LORA_KEY, path=path)


def copy_tokenizer(tokenizer_dir: str | None, directory: str) -> None:
    """Copies a tokenizer directory (or single model file) to `directory/tokenizer` once; a GGUF file's
    tokenizer is written there as tokenizer.json + configs (not the whole model file)."""
    if not tokenizer_dir:
        return
    dest = os.path.join(directory, TOKENIZER_DIR)
    if os.path.exists(dest):
        return
    if is_gguf_path(tokenizer_dir) and os.path.isfile(tokenizer_dir):
        from jaxwrite.text import gguf_tokenizer
        partial = dest + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        gguf_tokenizer(tokenizer_dir).save_pretrained(partial)
        os.replace(partial, dest)
    elif os.path.isdir(tokenizer_dir):
        # A model directory given as the tokenizer (an HF dir): its weights are no part of the tokenizer.
        shutil.copytree(tokenizer_dir, dest, ignore=shutil.ignore_patterns(*_WEIGHT_FILES))
    else:
        os.makedirs(dest)
        shutil.copy2(tokenizer_dir, dest)


def tokenizer_dir_of(path: str) -> str | None:
    """The tokenizer copy stored with a model dir / checkpoint root, if any."""
    root = _resolve_root(path)[0]
    dest = os.path.join(root, TOKENIZER_DIR)
    return dest if os.path.isdir(dest) else None


def save_model_dir(path: str | os.PathLike, model: nnx.Module, cfg: ModelConfig,
                   tokenizer_dir: str | None = None) -> str:
    """Writes model weights (Orbax), model_config.json and optionally a tokenizer copy to `path`."""
    path = os.path.abspath(os.fspath(path))
    os.makedirs(path, exist_ok=True)
    weights = os.path.join(path, "model")
    if os.path.exists(weights):
        raise InputError("model dir already holds weights; choose a new path", path=weights)
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(weights, to_pure(nnx.state(model)))
    write_model_config(path, cfg, model_class_name(model))
    copy_tokenizer(tokenizer_dir, path)
    return path


def is_model_dir(path: str | os.PathLike) -> bool:
    """Whether `path` is a layout `read_model_config` reads: model_config.json here, in checkpoints/
    (a trainer workdir), or in the parent of a step folder."""
    try:
        _resolve_root(os.fspath(path))
    except InputError:
        return False
    return True


def _resolve_root(path: str) -> tuple[str, int | None]:
    """(directory holding model_config.json, step dir chosen by the path or None)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(os.path.join(path, CONFIG_FILE)):
        return path, None
    if os.path.exists(os.path.join(path, "checkpoints", CONFIG_FILE)):
        return os.path.join(path, "checkpoints"), None
    parent, name = os.path.split(path)
    if name.isdigit() and os.path.exists(os.path.join(parent, CONFIG_FILE)):
        return parent, int(name)
    raise InputError(f"expected {CONFIG_FILE} here, in checkpoints/, or in the parent of a step folder",
                     path=path)


def load_model_from_checkpoint(path: str | os.PathLike, mesh: Mesh | None = None, rules=DEFAULT_RULES,
                               step: int | None = None) -> tuple[nnx.Module, ModelConfig]:
    """Builds the model described by model_config.json and restores its weights onto `mesh`.

    `path` is a model dir, a trainer checkpoint root, a trainer workdir, or one `<step>` folder.
    Parameters are created abstractly and only materialised by the restore (no double copy). A LoRA
    run's checkpoint is restored with its adapters and returned merged: a plain model of the base's shape.
    """
    root, step_from_path = _resolve_root(path)
    cfg, class_name, lora = _read_config(root)
    model = nnx.eval_shape(lambda: MODEL_CLASSES[class_name](cfg, nnx.Rngs(0)))
    if lora is not None:
        add_lora(model, lora)
    weights = os.path.join(root, "model")
    if os.path.isdir(weights) and step is None and step_from_path is None:
        target = abstract_target(nnx.state(model), mesh, rules)
        with ocp.StandardCheckpointer() as ckptr:
            found = ckptr.metadata(weights)
            found = getattr(found, "item_metadata", found)
            check_matches(target, getattr(found, "tree", found), "parameter", weights)
            nnx.update(model, ckptr.restore(weights, target))
        return (merge_lora(model) if lora else model), cfg
    ckpt = Checkpointer(root)
    try:
        ckpt.restore(model, None, step if step is not None else step_from_path, mesh, rules)
    finally:
        ckpt.close()
    return (merge_lora(model) if lora else model), cfg
