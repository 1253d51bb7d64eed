"""Hugging Face safetensors import/export without torch.

Import streams tensors: every parameter is built with `jax.make_array_from_callback`, so each device
shard is read (memory-mapped), transformed and placed on its own; host memory holds about one tensor at
a time, never the whole model twice. Export writes sharded safetensors + index that `transformers` loads.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh
from safetensors.numpy import save_file

from jaxwrite.common.errors import InputError
from jaxwrite.models.config import ModelConfig
from jaxwrite.models.hf_config import config_from_hf, config_to_hf, read_hf_config
from jaxwrite.models.safetensors_reader import SafetensorsFile
from jaxwrite.models.transformer import RewardModel, Transformer
from jaxwrite.parallel import DEFAULT_RULES, make_mesh, state_shardings

_SUPPORTED_DTYPES = {"F32", "BF16", "F16"}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                    "merges.txt", "generation_config.json", "tokenizer.model", "chat_template.jinja")

Transform = Callable[[np.ndarray], np.ndarray]


def _tables(cfg: ModelConfig):
    """(ours -> HF name, HF->ours transform, ours->HF transform) for top-level and per-layer params."""
    d, h, k, dh = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.dim_head
    ident = lambda x: x  # noqa: E731
    t = lambda x: x.T  # noqa: E731
    top = {
        ("embed",): ("embed_tokens.weight", ident, ident),
        ("final_norm", "weight"): ("norm.weight", ident, ident),
    }
    layer = {
        ("attn_norm", "weight"): ("input_layernorm.weight", ident, ident),
        ("mlp_norm", "weight"): ("post_attention_layernorm.weight", ident, ident),
        ("attn", "q"): ("self_attn.q_proj.weight", lambda w: w.T.reshape(d, h, dh), lambda p: p.reshape(d, h * dh).T),
        ("attn", "k"): ("self_attn.k_proj.weight", lambda w: w.T.reshape(d, k, dh), lambda p: p.reshape(d, k * dh).T),
        ("attn", "v"): ("self_attn.v_proj.weight", lambda w: w.T.reshape(d, k, dh), lambda p: p.reshape(d, k * dh).T),
        ("attn", "o"): ("self_attn.o_proj.weight", lambda w: w.T.reshape(h, dh, d), lambda p: p.reshape(h * dh, d).T),
        ("attn", "q_bias"): ("self_attn.q_proj.bias", lambda b: b.reshape(h, dh), lambda p: p.reshape(h * dh)),
        ("attn", "k_bias"): ("self_attn.k_proj.bias", lambda b: b.reshape(k, dh), lambda p: p.reshape(k * dh)),
        ("attn", "v_bias"): ("self_attn.v_proj.bias", lambda b: b.reshape(k, dh), lambda p: p.reshape(k * dh)),
        ("attn", "q_norm", "weight"): ("self_attn.q_norm.weight", ident, ident),
        ("attn", "k_norm", "weight"): ("self_attn.k_norm.weight", ident, ident),
        ("mlp", "gate"): ("mlp.gate_proj.weight", t, t),
        ("mlp", "up"): ("mlp.up_proj.weight", t, t),
        ("mlp", "down"): ("mlp.down_proj.weight", t, t),
    }
    return top, layer


def _hf_name(path: tuple, cfg: ModelConfig, prefix: str, layer: int | None = None):
    """HF tensor name and transforms for one of our parameter paths (layer index for stacked ones)."""
    top, per_layer = _tables(cfg)
    if path == ("lm_head",):
        return "lm_head.weight", (lambda w: w.T), (lambda p: p.T)
    if path == ("score",):
        return "score.weight", (lambda w: w.reshape(-1)), (lambda p: p.reshape(1, -1))
    if path[0] == "backbone":
        path = path[1:]
    if path[0] == "layers":
        name, fwd, back = per_layer[path[1:]]
        return f"{prefix}layers.{layer}.{name}", fwd, back
    name, fwd, back = top[path]
    return prefix + name, fwd, back


class _Reader:
    """Access to the tensors of a (possibly sharded) safetensors checkpoint, one tensor read at a time."""

    def __init__(self, path: str):
        index_path = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index_path):
            with open(index_path, encoding="utf-8") as f:
                weight_map = json.load(f).get("weight_map")
            if not isinstance(weight_map, dict):
                raise InputError("expected a 'weight_map' object", path=index_path, field="weight_map")
            files = sorted(set(weight_map.values()))
        else:
            files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
            weight_map = None
        if not files:
            raise InputError("no *.safetensors weights found; expected model.safetensors or an index", path=path)
        self.handles = {}
        for fname in files:
            fpath = os.path.join(path, fname)
            if not os.path.exists(fpath):
                raise InputError(f"weight shard '{fname}' listed in the index is missing", path=path)
            self.handles[fname] = SafetensorsFile(fpath)
        if weight_map is None:
            weight_map = {name: fname for fname, h in self.handles.items() for name in h.keys()}
        self.weight_map, self.path = weight_map, path

    def has(self, name: str) -> bool:
        return name in self.weight_map

    def _file(self, name: str) -> SafetensorsFile:
        if name not in self.weight_map:
            raise InputError(f"missing tensor '{name}'", path=self.path)
        handle = self.handles[self.weight_map[name]]
        if name not in handle.entries:
            raise InputError(f"missing tensor '{name}' (listed in the index)", path=handle.path)
        return handle

    def check(self, name: str, shape: tuple) -> None:
        handle = self._file(name)
        found, dtype = handle.shape(name), handle.dtype(name)
        if found != tuple(shape):
            raise InputError(f"tensor '{name}': expected shape {tuple(shape)}, found {found}",
                             path=os.path.join(self.path, self.weight_map[name]))
        if dtype not in _SUPPORTED_DTYPES:
            raise InputError(f"tensor '{name}': dtype {dtype} is not supported; expected one of "
                             f"{sorted(_SUPPORTED_DTYPES)}", path=os.path.join(self.path, self.weight_map[name]))

    def get(self, name: str) -> np.ndarray:
        return self._file(name).read(name)


def _detect_prefix(reader: _Reader) -> str:
    for prefix in ("model.", ""):
        if reader.has(prefix + "embed_tokens.weight"):
            return prefix
    raise InputError("missing tensor 'model.embed_tokens.weight'", path=reader.path)


def load_hf(path: str, dtype: str | None = None, mesh: Mesh | None = None, rules=DEFAULT_RULES,
            reward_model: bool | None = None):
    """Loads a local Hugging Face directory as a jaxwrite model (Transformer, or RewardModel for
    `*ForSequenceClassification` checkpoints). `model(tokens [B, T] int32).logits` -> [B, T, V].

    dtype: parameter and compute dtype ("float32" default, "bfloat16"). mesh: where to place the shards
    (default: all local devices on the fsdp axis when several, else one device).
    """
    path = os.fspath(path)
    hf = read_hf_config(path)
    cfg = config_from_hf(hf, source=os.path.join(path, "config.json"), dtype=dtype)
    archs = hf.get("architectures") or []
    if reward_model is None:
        reward_model = any(a.endswith("ForSequenceClassification") for a in archs)
    if reward_model and int(hf.get("num_labels", len(hf.get("id2label", {})) or 1)) != 1:
        raise InputError("reward model must have num_labels=1", path=os.path.join(path, "config.json"),
                         field="num_labels")
    return build_from_reader(cfg, _Reader(path), reward_model, mesh, rules)


def build_from_reader(cfg: ModelConfig, reader, reward_model: bool, mesh: Mesh | None = None,
                      rules=DEFAULT_RULES):
    """The model `cfg` describes, every parameter streamed from `reader` (Hugging Face tensor names and
    layouts: `has(name)`, `check(name, shape)`, `get(name)` -> np.ndarray) into its sharding on `mesh`."""
    make = (lambda: RewardModel(cfg, nnx.Rngs(0))) if reward_model else (lambda: Transformer(cfg, nnx.Rngs(0)))
    abstract = nnx.eval_shape(make)
    graphdef, abs_state = nnx.split(abstract)
    mesh = mesh or make_mesh((1, -1, 1))
    shardings = state_shardings(abs_state, mesh, rules)
    flat_abs = dict(nnx.to_flat_state(abs_state))
    flat_shard = dict(nnx.to_flat_state(shardings))
    prefix = _detect_prefix(reader)
    values = {}
    for key, var in flat_abs.items():
        sharding = flat_shard[key]
        sharding = sharding.get_value() if isinstance(sharding, nnx.Variable) else sharding
        values[key] = _load_param(reader, key, var, sharding, cfg, prefix)
    state = nnx.from_flat_state([(k, flat_abs[k].replace(values[k])) for k in flat_abs])
    return nnx.merge(graphdef, state)


def _load_param(reader: _Reader, key: tuple, var, sharding, cfg: ModelConfig, prefix: str) -> jax.Array:
    shape, dtype = var.get_value().shape, var.get_value().dtype
    stacked = "layers" in key
    if stacked:
        names = [_hf_name(key, cfg, prefix, i) for i in range(cfg.num_layers)]
        expected = _hf_shape(names[0][2], shape[1:], dtype)
        for name, _, _ in names:
            reader.check(name, expected)
    else:
        name, fwd, back = _hf_name(key, cfg, prefix)
        reader.check(name, _hf_shape(back, shape, dtype))
    cache: dict[int, np.ndarray] = {}

    def layer_value(i: int) -> np.ndarray:
        # Each device asks for its shard; keep the last transformed layer to avoid re-reading it.
        if i not in cache:
            cache.clear()
            name, fwd, _ = names[i]
            cache[i] = np.asarray(fwd(reader.get(name)), dtype=dtype)
        return cache[i]

    def callback(index):
        if stacked:
            layers = range(*index[0].indices(cfg.num_layers))
            return np.stack([layer_value(i)[index[1:]] for i in layers]) if len(layers) else \
                np.zeros((0,) + shape[1:], dtype)[index[1:]]
        if 0 not in cache:
            cache[0] = np.asarray(fwd(reader.get(name)), dtype=dtype)
        return cache[0][index]

    return jax.make_array_from_callback(shape, sharding, callback)


def _hf_shape(back: Transform, shape: tuple, dtype) -> tuple:
    return tuple(jax.eval_shape(lambda x: back(x), jax.ShapeDtypeStruct(shape, dtype)).shape)


def save_hf(model, path: str, dtype: str = "float32", tokenizer_dir: str | None = None,
            max_shard_bytes: int = 4 << 30) -> None:
    """Writes `model` as a Hugging Face directory (config.json, sharded safetensors + index), streaming
    one tensor at a time to host memory. Tokenizer files are copied from `tokenizer_dir` when given."""
    cfg: ModelConfig = model.cfg
    os.makedirs(path, exist_ok=True)
    np_dtype = {"float32": np.float32, "bfloat16": jnp.bfloat16, "float16": np.float16}[dtype]
    reward = isinstance(model, RewardModel)
    extra = {"architectures": [config_to_hf(cfg)["architectures"][0].replace("ForCausalLM",
                                                                             "ForSequenceClassification")],
             "num_labels": 1} if reward else None
    flat = nnx.to_flat_state(nnx.state(model))
    shards: list[dict[str, np.ndarray]] = [{}]
    sizes = [0]

    def emit(name: str, value: np.ndarray) -> None:
        if sizes[-1] and sizes[-1] + value.nbytes > max_shard_bytes:
            shards.append({})
            sizes.append(0)
        shards[-1][name] = np.ascontiguousarray(value.astype(np_dtype))
        sizes[-1] += value.nbytes

    for key, var in flat:
        arr = var.get_value()
        if "layers" in key:
            for i in range(cfg.num_layers):
                name, _, back = _hf_name(key, cfg, "model.", i)
                emit(name, back(np.asarray(jax.device_get(arr[i]))))
        else:
            name, _, back = _hf_name(key, cfg, "model.")
            emit(name, back(np.asarray(jax.device_get(arr))))
    weight_map = {}
    total = len(shards)
    for i, tensors in enumerate(shards):
        fname = "model.safetensors" if total == 1 else f"model-{i + 1:05d}-of-{total:05d}.safetensors"
        save_file(tensors, os.path.join(path, fname), metadata={"format": "pt"})
        weight_map.update({name: fname for name in tensors})
    if total > 1:
        with open(os.path.join(path, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
            json.dump({"metadata": {"total_size": sum(sizes)}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_to_hf(cfg, dtype=dtype, extra=extra), f, indent=2)
    if tokenizer_dir:
        for fname in _TOKENIZER_FILES:
            src = os.path.join(tokenizer_dir, fname)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(path, fname))
