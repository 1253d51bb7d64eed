"""GGUF import: llama.cpp tensors dequantized to float32 and streamed into the one model class.

The tensors are presented under their Hugging Face names and layouts, so the safetensors import path
(`hf_io.build_from_reader`: one tensor at a time, each device shard placed on its own) loads them
unchanged. Two things differ from a Hugging Face checkpoint:

* quantized blocks (Q4_0, Q4_K, ...) are dequantized with the gguf library's reference decoders;
* llama.cpp's converter reorders the query and key projection rows of llama-architecture models so its
  RoPE can rotate adjacent pairs (GPT-J style); the import puts them back in the half-split order the
  model (and transformers) rotate, head by head. Qwen2/Qwen3 files keep the Hugging Face order.
"""
from __future__ import annotations

import os

import numpy as np
from jax.sharding import Mesh

from jaxwrite.common.errors import InputError
from jaxwrite.common.gguf_file import GGUFFile, open_gguf
from jaxwrite.models.config import ModelConfig
from jaxwrite.models.gguf_config import config_from_gguf
from jaxwrite.models.hf_io import build_from_reader
from jaxwrite.parallel import DEFAULT_RULES

# Tensor types the import reads (the gguf library's decoders; each is covered by tests/test_gguf_*.py).
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                   "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")

_TOP = {"token_embd": "embed_tokens", "output_norm": "norm"}
_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_tensor_name(gguf_name: str) -> str | None:
    """The Hugging Face name of a llama.cpp tensor (`blk.3.attn_q.weight` -> `model.layers.3.self_attn.
    q_proj.weight`), None for tensors without one (rope_freqs: read into the config instead)."""
    parts = gguf_name.split(".")
    if gguf_name == "output.weight":
        return "lm_head.weight"
    if len(parts) == 2 and parts[0] in _TOP:
        return f"model.{_TOP[parts[0]]}.{parts[1]}"
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _LAYER:
        return f"model.layers.{parts[1]}.{_LAYER[parts[2]]}.{parts[3]}"
    return None


def dequantize(tensor, path: str) -> np.ndarray:
    """A GGUF tensor as float32 in numpy order (GGUF lists the fastest axis first: [576, 49152] is a
    [49152, 576] table)."""
    _check_type(tensor, path)
    from gguf import quants

    values = np.asarray(quants.dequantize(tensor.data, tensor.tensor_type), np.float32)
    if np.may_share_memory(values, tensor.data):   # F32 is a view of the mapped file: own the values
        values = values.copy()
    return values.reshape(tuple(int(n) for n in reversed(tensor.shape)))


def _check_type(tensor, path: str) -> None:
    kind = tensor.tensor_type.name
    if kind not in SUPPORTED_TYPES:
        raise InputError(f"tensor '{tensor.name}': type {kind} is not supported; expected one of "
                         f"{', '.join(SUPPORTED_TYPES)}", path=path, field=tensor.name)


def unpermute_rope_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Undoes llama.cpp's per-head row order for adjacent-pair RoPE: within each head, rows
    (pair p, half h) are stored at p * 2 + h; the half-split order wants h * (head_dim / 2) + p."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class GGUFTensors:
    """The tensors of a GGUF file under Hugging Face names and layouts (the reader `build_from_reader`
    takes): `get` dequantizes one tensor at a time."""

    def __init__(self, gfile: GGUFFile, cfg: ModelConfig):
        self.gfile, self.cfg, self.path = gfile, cfg, gfile.path
        self.names = {}
        for name in gfile.tensors:
            hf = hf_tensor_name(name)
            if hf is not None:
                _check_type(gfile.tensors[name], self.path)   # a type we cannot read fails before any is read
                self.names[hf] = name
            elif name != "rope_freqs.weight":
                raise InputError(f"tensor '{name}' has no place in a {gfile.architecture} model; expected only "
                                 "the tensors of a dense decoder", path=self.path, field=name)
        self._permuted = {"self_attn.q_proj.weight": cfg.num_heads, "self_attn.k_proj.weight": cfg.num_kv_heads} \
            if gfile.architecture == "llama" else {}

    def has(self, name: str) -> bool:
        return name in self.names

    def _tensor(self, name: str):
        if name not in self.names:
            raise InputError(f"missing the tensor of '{name}' (Hugging Face name); expected it in a "
                             f"{self.gfile.architecture} model", path=self.path)
        return self.gfile.tensors[self.names[name]]

    def check(self, name: str, shape: tuple) -> None:
        tensor = self._tensor(name)
        found = tuple(int(n) for n in reversed(tensor.shape))
        if found != tuple(shape):
            raise InputError(f"tensor '{tensor.name}': expected shape {tuple(shape)} (numpy order), found {found}",
                             path=self.path, field=tensor.name)
        _check_type(tensor, self.path)

    def get(self, name: str) -> np.ndarray:
        tensor = self._tensor(name)
        value = dequantize(tensor, self.path)
        self.gfile.release(tensor)
        heads = self._permuted.get(name.split(".", 3)[-1]) if name.startswith("model.layers.") else None
        return unpermute_rope_rows(value, heads) if heads else value


def load_gguf(source: str | os.PathLike | GGUFFile, dtype: str | None = None, mesh: Mesh | None = None,
              rules=DEFAULT_RULES):
    """A GGUF file as a jaxwrite Transformer (float32 by default, `dtype="bfloat16"` for bf16 parameters
    and compute), with the config its metadata describes."""
    gfile = open_gguf(source)
    cfg = config_from_gguf(gfile, dtype=dtype)
    return build_from_reader(cfg, GGUFTensors(gfile, cfg), False, mesh, rules)
