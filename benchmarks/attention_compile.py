"""Compiled HBM and FLOPs of each attention implementation at long context, per v5p chip (AOT, no TPU).

One attention call of Qwen2.5-32B (40 query heads, 8 KV heads, head_dim 128, bf16), one packed
sequence per chip, compiled through the TPU compiler for a v5p topology with libtpu (`pip install
"jax[tpu]"`); the batch is sharded one sequence per chip, so every figure is per device:
- train: forward + backward (the vjp of the attention output), as a training step runs it;
- forward: the forward pass alone;
- decode: one new token for 16 rows over a full cache of `seq` slots (the rollout engine's decode step;
  every implementation name runs the one cache pass, jaxwrite.models.attention_cache, so it is measured
  once, under blockwise).
Memory is XLA's `memory_analysis()` (temporaries, arguments, outputs). FLOPs are `cost_analysis()`'s,
with the loops accounted for: the blockwise pass is one `lax.scan` per direction over the n (n + 1) / 2
lower-triangular block pairs, and the cost analysis counts a loop body once, so the script compiles
it a second time with the pair loops unrolled u times (u divides the trip count) and takes
body = (F_u - F_1) / (u - 1), total = F_1 + (trips - 1) * body. The reference path has no loops
(its query blocks are unrolled in Python). Splash is an opaque Mosaic kernel that XLA's cost analysis
does not see: its FLOPs are counted by jaxwrite.aot.hlo_flops from each kernel call's shapes, block
sizes and the causal mask's visible blocks (jaxwrite.aot.kernel_flops). "causal" is the causal
attention FLOPs a model counts (ModelConfig.flops_per_token: 4 * heads * head_dim * seq / 2 per token
forward, x3 for training).

    python benchmarks/attention_compile.py                       # 4k / 16k / 32k, a markdown table
    python benchmarks/attention_compile.py --seqs 4096 --json out.json
    python benchmarks/attention_compile.py --topology cpu --seqs 2048 --block 256 --impls reference,blockwise
"""
from __future__ import annotations

import argparse
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxwrite.aot.hlo_flops import hlo_flops
from jaxwrite.models import KVCache
from jaxwrite.models import attention as attn
from jaxwrite.models import attention_blockwise as blockwise
from jaxwrite.models.attention_cache import cache_attention
from jaxwrite.models.attention_mask import self_attention_mask
from jaxwrite.parallel import MESH_AXES, use_mesh_rules

HEADS, KV_HEADS, HEAD_DIM = 40, 8, 128   # Qwen2.5-32B
DECODE_ROWS = 16                         # rollout rows per chip (GRPO 32 x 32 rows over 64 chips)


def devices(topology: str):
    if topology == "cpu":
        return jax.devices("cpu")[:1]
    from jax.experimental import topologies
    return topologies.get_topology_desc(topology_name=topology, platform="tpu").devices


def _attention(impl: str, block: int, unroll: int):
    """attention(q, k, v, segment_ids) for a no-cache pass; blockwise with its pair loops unrolled."""
    def fn(q, k, v, seg):
        mask = self_attention_mask(seg != 0, seg)
        if impl != "blockwise":
            return attn.attend(q, k, v, mask, impl, block)
        b, t, h, d = q.shape
        qg = q.reshape(b, t, k.shape[1], h // k.shape[1], d)
        return blockwise.self_attention(qg, k, v, mask, block, unroll).reshape(q.shape)
    return fn


def _compile(fn, args, mesh):
    shardings = [NamedSharding(mesh, P("data", *([None] * (len(a.shape) - 1)))) for a in args]
    with use_mesh_rules(mesh):
        return jax.jit(fn, in_shardings=shardings).lower(*args).compile()


def _flops(compiled) -> float:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", 0.0)) if cost else 0.0


def _memory(compiled) -> dict:
    m = compiled.memory_analysis()
    return {"temp_bytes": int(m.temp_size_in_bytes), "argument_bytes": int(m.argument_size_in_bytes),
            "output_bytes": int(m.output_size_in_bytes)}


def _smallest_divisor(n: int) -> int:
    return next(u for u in range(2, n + 1) if n % u == 0)


def causal_flops(seq: int, mode: str) -> float:
    """Causal attention FLOPs of one sequence as ModelConfig.flops_per_token counts them."""
    forward = 2 * 2 * HEADS * HEAD_DIM * (seq / 2) * seq
    return 3 * forward if mode == "train" else forward


def measure(impl: str, seq: int, mode: str, devs, block: int, dtype) -> dict:
    n = len(devs)
    mesh = Mesh(np.asarray(devs).reshape(n, 1, 1), MESH_AXES)
    sds = lambda shape, dt=dtype: jax.ShapeDtypeStruct(shape, dt)
    row = {"impl": impl, "seq": seq, "mode": mode}
    if mode == "decode":
        b = DECODE_ROWS * n

        def step(q, k, v, cache_k, cache_v, lengths):
            mask = self_attention_mask(jnp.ones((q.shape[0], 1), bool))
            cache = KVCache(cache_k[None], cache_v[None], lengths)                 # one layer
            qg = q.reshape(q.shape[0], 1, KV_HEADS, HEADS // KV_HEADS, HEAD_DIM)
            return cache_attention(qg, k, v, mask, cache, 0, block)
        new, slots = sds((b, KV_HEADS, 1, HEAD_DIM)), sds((b, KV_HEADS, seq, HEAD_DIM))
        args = (sds((b, 1, HEADS, HEAD_DIM)), new, new, slots, slots, sds((b,), jnp.int32))
        compiled = _compile(step, args, mesh)
        return {**row, **_memory(compiled), "compiled_flops": None, "causal_flops": None}
    args = (sds((n, seq, HEADS, HEAD_DIM)), sds((n, KV_HEADS, seq, HEAD_DIM)), sds((n, KV_HEADS, seq, HEAD_DIM)),
            sds((n, seq), jnp.int32))

    def build(unroll: int):
        fn = _attention(impl, block, unroll)
        if mode == "forward":
            return fn, args

        def train(q, k, v, seg, dout):
            out, vjp = jax.vjp(lambda q, k, v: fn(q, k, v, seg), q, k, v)
            return vjp(dout)
        return train, args + (sds((n, seq, HEADS, HEAD_DIM)),)

    compiled = _compile(*build(1), mesh)
    row.update(_memory(compiled))
    flops = _flops(compiled)
    if impl == "blockwise":
        trips = len(blockwise.causal_block_pairs(seq // blockwise.self_block_size(seq, block))[0])
        if trips > 1:
            u = _smallest_divisor(trips)
            body = (_flops(_compile(*build(u), mesh)) - flops) / (u - 1)
            flops += (trips - 1) * body
        row["loop_trips"] = trips
    if impl == "splash":
        counted = hlo_flops(compiled.as_text())
        flops = counted.flops if not (counted.custom_calls or counted.unknown_loops) else 0.0
    # cost_analysis of an SPMD executable is already per device.
    row["compiled_flops"] = flops or None
    row["causal_flops"] = causal_flops(seq, mode)
    return row


def _fmt_bytes(x) -> str:
    return f"{x / 2**30:,.2f} GiB" if x >= 2**30 else f"{x / 2**20:,.1f} MiB"


def markdown(rows: list[dict]) -> str:
    lines = ["| mode | tokens | implementation | temp HBM | arguments | outputs | compiled FLOPs | / causal |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['mode']} | {r['seq']:,} | {r['impl']} | does not compile: {r['error']} ||||")
            continue
        f, c = r["compiled_flops"], r["causal_flops"]
        flops = f"{f / 1e12:,.2f} T" if f else "n/a"
        ratio = f"{f / c:.3f}" if f and c else "n/a"
        lines.append(f"| {r['mode']} | {r['seq']:,} | {r['impl']} | {_fmt_bytes(r['temp_bytes'])} | "
                     f"{_fmt_bytes(r['argument_bytes'])} | {_fmt_bytes(r['output_bytes'])} | {flops} | {ratio} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topology", default="v5p:2x2x1", help="TPU topology name, or cpu (default v5p:2x2x1)")
    p.add_argument("--seqs", default="4096,16384,32768")
    p.add_argument("--impls", default="reference,blockwise,splash")
    p.add_argument("--modes", default="train,forward,decode")
    p.add_argument("--block", type=int, default=512)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--json", help="write the rows as a JSON list here")
    args = p.parse_args(argv)
    try:
        devs = devices(args.topology)
    except Exception as err:   # no libtpu, unknown topology: one line
        print(f"cannot get devices of topology '{args.topology}': {str(err).splitlines()[0]} "
              f"(TPU topologies need libtpu: pip install \"jax[tpu]\")", file=sys.stderr)
        return 2
    rows = []
    for mode in args.modes.split(","):
        for seq in map(int, args.seqs.split(",")):
            for impl in args.impls.split(","):
                if mode == "decode" and impl != "blockwise":
                    continue   # one cache pass on every platform (attention_cache.py)
                try:
                    row = measure(impl, seq, mode, devs, args.block, jnp.dtype(args.dtype))
                except Exception as err:   # e.g. RESOURCE_EXHAUSTED: the figure is that it does not fit
                    row = {"impl": impl, "seq": seq, "mode": mode, "error": str(err).splitlines()[0][:160]}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
