"""Where long-context prefill time goes on a CPU: one prefill chunk at growing cache fills, the engine
beside transformers on the same weights, and the cache attention alone beside torch's SDPA (issue 30).

    python benchmarks/prefill_profile.py --model DIR [--chunk 256] [--fills 0,1024,2048,3840] [--json OUT]

1. One chunk of `--chunk` prompt tokens written after `fill` cached tokens, batch 1: the engine's jitted
   prefill call (`infer.steps.prefill_chunk`, the CPU engine's cache-sized chunk) against transformers'
   forward of the same tokens with a DynamicCache of `fill` tokens (cropped back after each call). The
   fill-0 row is the layers' linear work; what a fill adds is attention over the cache.
2. That attention alone for one layer (the model's heads, the chunk's queries over `fill` cached keys plus
   their own, causally): `models.attention_cache.cache_attention` against
   `torch.nn.functional.scaled_dot_product_attention` with the same mask, in GFLOP/s of the causal work.

Each figure is the best of `--reps` timed calls after one untimed (compiling) call. The last line is a
JSON summary. Timing only: nothing here is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("JAX_PLATFORMS", "cpu")   # a CPU profile: libtpu, if installed, stays unloaded


def _best(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def engine_chunk_s(model, chunk: int, fill: int, reps: int) -> float:
    """Seconds of one engine prefill call: `chunk` tokens after `fill` cached ones (batch 1)."""
    import jax
    import jax.numpy as jnp

    from jaxwrite.infer import Engine, steps
    from jaxwrite.models import KVCache
    engine = Engine(model, None, max_batch=1, eos_ids=[], max_context=fill + chunk)
    decode_model, cfg = engine._decode_model, model.cfg
    cache_len = engine._cache_len(fill + chunk)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (1, chunk)), jnp.int32)   # [1, T]
    mask = jnp.ones((1, chunk), bool)
    hidden, tail = jnp.zeros((1, 1, cfg.d_model), jnp.float32), jnp.zeros((1, 1), jnp.int32)

    def filled():   # a fresh cache each call: the step donates (updates in place) the one it gets
        return tuple(KVCache(c.k + 0.01, c.v + 0.01, jnp.full_like(c.lengths, fill))
                     for c in decode_model.empty_caches(cfg, 1, cache_len))

    def call(caches=None):
        caches = caches if caches is not None else filled()
        jax.block_until_ready(caches)
        start = time.perf_counter()
        jax.block_until_ready(steps.prefill_chunk(decode_model, caches, tokens, mask, hidden, tail, jnp.int32(fill)))
        return time.perf_counter() - start

    call()
    return min(call() for _ in range(reps))


def hf_chunk_s(hf_model, chunk: int, fill: int, reps: int) -> float:
    """Seconds of transformers' forward of `chunk` tokens after a DynamicCache of `fill` tokens."""
    import torch
    from transformers import DynamicCache

    rng = np.random.default_rng(0)
    vocab = hf_model.config.vocab_size
    past_ids = torch.tensor(rng.integers(0, vocab, (1, max(fill, 1))))
    ids = torch.tensor(rng.integers(0, vocab, (1, chunk)))
    with torch.inference_mode():
        cache = DynamicCache()
        if fill:
            hf_model(past_ids, past_key_values=cache, use_cache=True)

        def call():
            hf_model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            cache.crop(-chunk)   # back to the fill (this transformers takes the tokens to drop)

        return _best(call, reps)


def attention_alone(cfg, chunk: int, fill: int, reps: int) -> dict:
    """One layer's cache attention (jaxwrite) and SDPA (torch) for `chunk` queries over fill + own keys."""
    import jax
    import jax.numpy as jnp
    import torch

    from jaxwrite.models import KVCache
    from jaxwrite.models.attention_cache import cache_attention
    from jaxwrite.models.attention_mask import self_attention_mask
    kv, heads, hd = cfg.num_kv_heads, cfg.num_heads, cfg.dim_head
    groups = heads // kv
    slots = -(-(fill + chunk) // cfg.attention_block) * cfg.attention_block
    rng = np.random.default_rng(0)
    normal = lambda *shape: rng.standard_normal(shape, np.float32)  # noqa: E731
    q = jnp.asarray(normal(1, chunk, kv, groups, hd))                                   # [B, T, K, G, H]
    k, v = jnp.asarray(normal(1, kv, chunk, hd)), jnp.asarray(normal(1, kv, chunk, hd))   # [B, K, T, H]
    cache = KVCache(jnp.asarray(normal(1, 1, kv, slots, hd)), jnp.asarray(normal(1, 1, kv, slots, hd)),
                    jnp.full((1,), fill, jnp.int32))
    mask = self_attention_mask(jnp.ones((1, chunk), bool))
    ours = jax.jit(lambda q, k, v, cache: cache_attention(q, k, v, mask, cache, 0, cfg.attention_block))
    ours_s = _best(lambda: ours(q, k, v, cache).block_until_ready(), reps)
    qt, kt, vt = (torch.randn(1, heads, n, hd) for n in (chunk, fill + chunk, fill + chunk))
    allowed = torch.ones(chunk, fill + chunk, dtype=torch.bool)
    allowed[:, fill:] = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool))
    with torch.inference_mode():
        torch_s = _best(lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed), reps)
    flops = 4 * chunk * (fill + (chunk + 1) / 2) * heads * hd   # QK and PV over the allowed pairs
    return {"jaxwrite_ms": ours_s * 1e3, "torch_ms": torch_s * 1e3,
            "jaxwrite_gflops": flops / ours_s / 1e9, "torch_gflops": flops / torch_s / 1e9}


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """--model, --reps, --threads, --json: shared with decode_profile.py."""
    parser.add_argument("--model", required=True, help="a Hugging Face model directory (both sides load it)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads")
    parser.add_argument("--json", help="also write the rows here")


def load_both(args):
    """(jaxwrite's model, transformers' model) from args.model, both float32; torch on args.threads."""
    import torch
    from transformers import AutoModelForCausalLM

    from jaxwrite.models import load_hf
    torch.set_num_threads(args.threads)
    return load_hf(args.model), AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()


def finish(args, summary: dict) -> int:
    """Writes the summary to --json (if given) and prints it as the last line."""
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    print(json.dumps(summary))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--chunk", type=int, default=256, help="prompt tokens per call (the CPU engine's chunk)")
    parser.add_argument("--fills", default="0,1024,2048,3840", help="cached tokens before the chunk")
    args = parser.parse_args(argv)
    model, hf_model = load_both(args)
    rows = []
    for fill in (int(f) for f in args.fills.split(",")):
        ours = engine_chunk_s(model, args.chunk, fill, args.reps)
        theirs = hf_chunk_s(hf_model, args.chunk, fill, args.reps)
        attention = attention_alone(model.cfg, args.chunk, fill, args.reps)
        row = {"chunk": args.chunk, "fill": fill, "engine_ms": ours * 1e3, "transformers_ms": theirs * 1e3,
               "ratio": theirs / ours, "attention_one_layer": attention, "load": os.getloadavg()[0]}
        rows.append(row)
        print(f"chunk {args.chunk} after {fill:6d}: engine {ours * 1e3:7.1f} ms, transformers {theirs * 1e3:7.1f} ms "
              f"(x{row['ratio']:.2f}); one layer's attention {attention['jaxwrite_ms']:6.2f} ms "
              f"({attention['jaxwrite_gflops']:.0f} GFLOP/s) vs SDPA {attention['torch_ms']:6.2f} ms "
              f"({attention['torch_gflops']:.0f} GFLOP/s); load {row['load']:.1f}", flush=True)
    return finish(args, {"model": args.model, "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
