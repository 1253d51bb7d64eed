"""Where a decode step's time goes on a CPU: the engine's jitted decode steps at growing batch and cache fill,
beside transformers' one-token forward over a cache of the same fill, on the same weights (issue 30).

    python benchmarks/decode_profile.py --model DIR [--batches 1,2,4,8] [--fills 64,1024,1984] [--json OUT]

Engine: `infer.steps.decode_chunk` itself (greedy, unconstrained), `--steps` steps in one call on a cache of
`fill` tokens per row (each call gets a fresh cache: the step donates the one it gets), in ms per step.
transformers: the forward of one new token per row after a DynamicCache of `fill` tokens (cropped back after
each call), greedy argmax of the logits, in ms per step. The fill-64 column is each side's fixed cost (the
weights, the LM head), what a larger fill adds is attention over the cache; dividing by the batch gives
the cost a row adds.

Each figure is the best of `--reps` timed calls after one untimed (compiling) call. The last line is a JSON
summary. Timing only: nothing here is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("JAX_PLATFORMS", "cpu")   # a CPU profile: libtpu, if installed, stays unloaded

from prefill_profile import _best, add_common_args, finish, load_both  # noqa: E402


def engine_step_ms(model, batch: int, fill: int, steps_per_call: int, reps: int) -> float:
    """Milliseconds per decode step of the engine's decode_chunk: `batch` rows after `fill` cached tokens."""
    import jax
    import jax.numpy as jnp

    from jaxwrite.infer import Engine, steps
    from jaxwrite.infer.sampling import sample_keys
    from jaxwrite.models import KVCache
    engine = Engine(model, None, max_batch=batch, eos_ids=[], max_context=fill + steps_per_call + 1)
    decode_model, cfg = engine._decode_model, model.cfg
    cache_len = engine._cache_len(fill + steps_per_call)
    place = lambda x: engine._place(x, ("batch",))  # noqa: E731
    rng = np.random.default_rng(0)
    rows = steps.Rows(
        token=place(rng.integers(0, cfg.vocab_size, batch).astype(np.int32)),
        done=place(np.zeros(batch, bool)), generated=place(np.zeros(batch, np.int32)),
        max_new=place(np.full(batch, steps_per_call + 1, np.int32)),
        keys=engine._place(sample_keys([0] * batch, list(range(batch))), ("batch", None)),
        temperature=place(np.zeros(batch, np.float32)), top_p=place(np.ones(batch, np.float32)),
        top_k=place(np.zeros(batch, np.int32)), cstate=place(np.zeros(batch, np.int32)))
    table, dist = engine.constraints.state_table(engine.constraints.layout([None] * batch)[1])
    tables = steps.Tables(engine._place(table, (None, None)), engine._place(dist, (None,)),
                          engine._place(engine._eos, (None,)))
    mode = steps.Mode(sampled=False, constrained=False)

    def filled():   # a fresh cache each call, placed as the engine places its own
        return tuple(KVCache(engine._place(c.k + 0.01, steps.CACHE_AXES), engine._place(c.v + 0.01, steps.CACHE_AXES),
                             engine._place(jnp.full_like(c.lengths, fill), ("cache_batch",)))
                     for c in decode_model.empty_caches(cfg, batch, cache_len))

    def call():
        caches = jax.block_until_ready(filled())
        start = time.perf_counter()
        jax.block_until_ready(steps.decode_chunk(decode_model, caches, rows, tables, steps_per_call, mode))
        return time.perf_counter() - start

    call()
    return min(call() for _ in range(reps)) / steps_per_call * 1e3


def hf_step_ms(hf_model, batch: int, fill: int, reps: int) -> float:
    """Milliseconds of transformers' forward of one token per row after a DynamicCache of `fill` tokens."""
    import torch
    from transformers import DynamicCache

    rng = np.random.default_rng(0)
    vocab = hf_model.config.vocab_size
    past_ids = torch.tensor(rng.integers(0, vocab, (batch, fill)))
    ids = torch.tensor(rng.integers(0, vocab, (batch, 1)))
    with torch.inference_mode():
        cache = DynamicCache()
        hf_model(past_ids, past_key_values=cache, use_cache=True, logits_to_keep=1)

        def call():
            out = hf_model(ids, past_key_values=cache, use_cache=True)
            out.logits[:, -1].argmax(-1)
            cache.crop(-1)   # back to the fill (this transformers takes the tokens to drop)

        return _best(call, reps) * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--fills", default="64,1024,1984", help="cached tokens per row before the step")
    parser.add_argument("--steps", type=int, default=16, help="engine decode steps per timed call")
    args = parser.parse_args(argv)
    model, hf_model = load_both(args)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        for fill in (int(f) for f in args.fills.split(",")):
            ours = engine_step_ms(model, batch, fill, args.steps, args.reps)
            theirs = hf_step_ms(hf_model, batch, fill, args.reps)
            row = {"batch": batch, "fill": fill, "engine_ms": ours, "transformers_ms": theirs,
                   "ratio": theirs / ours, "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"batch {batch:2d} fill {fill:6d}: engine {ours:7.1f} ms/step, transformers {theirs:7.1f} ms/step "
                  f"(x{row['ratio']:.2f}); load {row['load']:.1f}", flush=True)
    return finish(args, {"model": args.model, "steps_per_call": args.steps, "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
