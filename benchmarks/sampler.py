"""Per-step sampling cost: jaxwrite's sampler beside a sort-based JAX sampler and transformers' warpers.

    python benchmarks/sampler.py                 # batch 32, vocab 4,096 and 151,936

Settings per row: greedy; temperature 1 (GRPO rollouts); top-p 0.95; WritingBench's preset (T 0.7,
top-p 0.8, top-k 20). Three implementations on the same logits [batch, vocab]:
- jaxwrite: `sample_tokens` (edge search by bisection, no sort; one uniform per row, inverse CDF);
- sort-based JAX: sort the vocabulary, cumulative softmax for the top-p prefix, Gumbel categorical
  (the sampler jaxwrite used before);
- transformers: TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, softmax, multinomial
  (torch, same threads).
Each is jitted/warmed up once, then timed over 30 calls. The last line is JSON.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import time

import numpy as np

SETTINGS = {"greedy": (0.0, 1.0, 0), "temperature 1": (1.0, 1.0, 0), "top-p 0.95": (1.0, 0.95, 0),
            "WritingBench (T 0.7, top-p 0.8, top-k 20)": (0.7, 0.8, 20)}


def sort_based(logits, keys, steps, temperature, top_p, top_k):
    import jax
    import jax.numpy as jnp
    from jaxwrite.infer.sampling import first_argmax
    scaled = logits / jnp.maximum(temperature, 1e-6)[:, None]
    ranked = -jnp.sort(-scaled, axis=-1)
    vocab = logits.shape[-1]
    keep = jnp.arange(vocab)[None, :] < jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)[:, None]
    probs = jax.nn.softmax(jnp.where(keep, ranked, -jnp.inf), axis=-1)
    keep &= (jnp.cumsum(probs, axis=-1) - probs) < top_p[:, None]
    edge = jnp.take_along_axis(ranked, (jnp.sum(keep, axis=-1) - 1)[:, None], axis=-1)
    filtered = jnp.where(scaled >= edge, scaled, -jnp.inf)
    step_keys = jax.vmap(jax.random.fold_in)(keys, steps)
    drawn = jax.vmap(jax.random.categorical)(step_keys, filtered).astype(jnp.int32)
    return jnp.where(temperature > 0, drawn, first_argmax(logits))


def _time_jax(fn, args, calls: int) -> float:
    import jax
    fn = jax.jit(fn)
    fn(*args).block_until_ready()
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    out.block_until_ready()
    return (time.perf_counter() - start) / calls


def _time_transformers(logits: np.ndarray, temperature: float, top_p: float, top_k: int, calls: int) -> float:
    import torch
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
    torch.set_num_threads(os.cpu_count() or 1)
    scores = torch.from_numpy(logits)
    warpers = LogitsProcessorList()
    if temperature > 0 and temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))

    def step():
        if temperature == 0:
            return torch.argmax(scores, dim=-1)
        warped = warpers(None, scores)
        return torch.multinomial(torch.softmax(warped, dim=-1), 1)

    with torch.inference_mode():
        step()
        start = time.perf_counter()
        for _ in range(calls):
            step()
    return (time.perf_counter() - start) / calls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--vocabs", default="4096,151936")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args(argv)

    import jax.numpy as jnp
    from jaxwrite.infer.sampling import sample_keys, sample_tokens
    rows = []
    for vocab in map(int, args.vocabs.split(",")):
        logits = (np.random.default_rng(0).normal(size=(args.batch, vocab)) * 3).astype(np.float32)
        keys = jnp.asarray(sample_keys(list(range(args.batch)), [0] * args.batch))
        steps = jnp.zeros(args.batch, jnp.int32)
        for name, (t, p, k) in SETTINGS.items():
            jax_args = (jnp.asarray(logits), keys, steps, jnp.full(args.batch, t, jnp.float32),
                        jnp.full(args.batch, p, jnp.float32), jnp.full(args.batch, k, jnp.int32))
            # The engine compiles the sampling branch out when every live row is greedy (steps.Mode).
            ours = functools.partial(sample_tokens, may_sample=t > 0)
            row = {"vocab": vocab, "setting": name,
                   "jaxwrite_ms": 1e3 * _time_jax(ours, jax_args, args.calls),
                   "sort_based_ms": 1e3 * _time_jax(sort_based, jax_args, args.calls)}
            if not args.skip_transformers:
                row["transformers_ms"] = 1e3 * _time_transformers(logits, t, p, k, args.calls)
            rows.append(row)
            print(f"vocab {vocab:>7} {name:<42} jaxwrite {row['jaxwrite_ms']:7.2f} ms  sort-based "
                  f"{row['sort_based_ms']:7.2f} ms  transformers {row.get('transformers_ms', float('nan')):7.2f} ms",
                  flush=True)
    print(json.dumps({"batch": args.batch, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
