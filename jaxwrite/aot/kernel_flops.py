"""Matmul FLOPs of the Pallas kernels jaxwrite runs, read from a compiled `tpu_custom_call`'s text.

XLA sees a Pallas kernel as an opaque custom call, so `hlo_flops` asks this module what one call
costs. The call's name is the kernel's (`pallas_call(name=...)`), its operand shapes are in
`operand_layout_constraints`, and Pallas keeps the kernel's `metadata` in the call's
`kernel_metadata` attribute. Two families are known:

- jaxwrite's log-prob kernels (jaxwrite.kernels): `KERNEL_MATMULS[k]` products of [n, D] x [D, V]
  (the backward kernels recompute the logit tile before their own product).
- JAX's splash attention (jax.experimental.pallas.ops.tpu.splash_attention), as jaxwrite calls it:
  a causal mask, marked by the named scope SPLASH_CAUSAL_SCOPE in the call's op_name. The kernel grid
  skips fully masked (query block, key block) pairs, so one call costs
  batch x query heads x visible pairs x SPLASH_MATMULS[phase] x 2 bq bk head_dim,
  with the block sizes of its phase from the `xprof_metadata` splash attaches (its BlockSizes).
  Matmuls per visible pair, as the kernel bodies compute them: forward q·kᵀ and p·v (2); dq
  recomputes q·kᵀ, then do·vᵀ and ds·k (3); dkv recomputes q·kᵀ, then pᵀ·do, do·vᵀ and dsᵀ·q (4),
  plus ds·k when dq is fused into it (`use_fused_bwd_kernel`: the call then has 6 outputs, not 4).
Any other kernel, or a splash call without the causal mark, returns None: its FLOPs are unknown.
"""
from __future__ import annotations

import json
import math
import re

from jaxwrite.models.attention_kernels import SPLASH_CAUSAL_SCOPE

KERNEL_MATMULS = {"logprob_forward": 1, "logprob_dh": 2, "logprob_dw": 2}
SPLASH_MATMULS = {"fwd": 2, "dq": 3, "dkv": 4}

_ARRAY = re.compile(r"([a-z]+\d*)\[([\d,]*)\]")
_LAYOUTS = re.compile(r"operand_layout_constraints=\{(.*?)\}\}")
_SPLASH = re.compile(r"^splash_(?:mha|mqa)_(fwd|dkv|dq)")
_XPROF = re.compile(r'"xprof_metadata"\s*:\s*"((?:[^"\\]|\\.)*)"')
_FLOAT = ("bf16", "f16", "f32")
_HEAD_DIM_MINOR = 1   # splash's QKVLayout.HEAD_DIM_MINOR: [..., seq, head_dim]
_FUSED_DKV_OUTPUTS = 6   # dq scratch, dk / dv scratch, dq, dk, dv (4 without the dq pair)


def _operands(rest: str) -> list[tuple[str, list[int]]]:
    """(dtype, dims) of each operand, in order, from the call's layout constraints."""
    layouts = _LAYOUTS.search(rest)
    if not layouts:
        return []
    return [(m.group(1), [int(d) for d in m.group(2).split(",") if d]) for m in _ARRAY.finditer(layouts.group(1))]


def causal_visible_pairs(q_blocks: int, kv_blocks: int, bq: int, bk: int) -> int:
    """(query block, key block) pairs of a causal mask with at least one visible entry: query block i
    sees key blocks up to the one holding its last position, (i + 1) bq - 1."""
    return sum(min(kv_blocks, ((i + 1) * bq - 1) // bk + 1) for i in range(q_blocks))


def _splash_flops(phase: str, rest: str, outputs: int) -> float | None:
    if SPLASH_CAUSAL_SCOPE not in rest:
        return None
    typed = _operands(rest)
    operands = [(dt, dims) for dt, dims in typed if dt in _FLOAT]
    if len(operands) < 2:
        return None
    (_, q), (_, k) = operands[:2]         # q [..., heads, seq, hd]; k [..., kv_heads, seq, hd] ([seq, hd]: MQA)
    meta = _XPROF.search(rest)
    sizes = json.loads(json.loads(f'"{meta.group(1)}"')) if meta else {}   # a JSON string holding JSON
    if len(q) < 3 or len(k) < 2:
        return None
    if sizes.get("q_layout", _HEAD_DIM_MINOR) != _HEAD_DIM_MINOR:
        q = q[:-2] + [q[-1], q[-2]]
    if sizes.get("k_layout", _HEAD_DIM_MINOR) != _HEAD_DIM_MINOR:
        k = k[:-2] + [k[-1], k[-2]]
    batch, heads, q_seq, head_dim = math.prod(q[:-3]), q[-3], q[-2], q[-1]
    kv_seq = k[-2]
    suffix = "" if phase == "fwd" else "_" + phase
    bq, bk = sizes.get("block_q" + suffix), sizes.get("block_kv" + suffix)
    if not bq or not bk:
        mask = next((dims for dt, dims in typed if dt == "s8" and len(dims) == 3), None)
        if mask is None:   # no metadata and no block-mask table to read the grid from
            return None
        bq, bk = q_seq // mask[1], kv_seq // mask[2]
    fused = phase == "dkv" and outputs == _FUSED_DKV_OUTPUTS   # dq scratch and dq come out of dkv too
    matmuls = SPLASH_MATMULS[phase] + (1 if fused else 0)
    pairs = causal_visible_pairs(q_seq // bq, kv_seq // bk, bq, bk)
    return batch * heads * pairs * matmuls * 2.0 * bq * bk * head_dim


def kernel_flops(name: str, rest: str, shape: str = "") -> float | None:
    """FLOPs of one call of a known Pallas kernel named `name` (its HLO instruction name), None for an
    unknown one. `rest` is the instruction's text after the opcode, `shape` its result shape."""
    splash = _SPLASH.match(name)
    if splash:
        return _splash_flops(splash.group(1), rest, len(_ARRAY.findall(shape)))
    kernel = next((k for k in KERNEL_MATMULS if name.startswith(k)), None)
    shapes = [dims for _, dims in _operands(rest)]
    if kernel is None or len(shapes) < 2 or len(shapes[0]) != 2 or len(shapes[1]) != 2:
        return None
    (n, d), (_, v) = shapes[0], shapes[1]
    return KERNEL_MATMULS[kernel] * 2.0 * n * d * v
