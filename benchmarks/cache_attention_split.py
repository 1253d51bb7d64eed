"""The prefill's cache pass with the mask only where it is needed, beside the single masked loop it replaced.

  python benchmarks/cache_attention_split.py [--fills 1024,2048,3840,7936] [--chunk 256] [--reps 15]

One layer of SmolLM2-135M's shape (3 kv heads x 3 query heads per kv head, head dim 64), batch 1, a
prefill chunk of `--chunk` tokens after `--fills` cached slots in 512-slot key blocks: the engine's
`cache_attention` (the key blocks every row has filled read without a mask, then the rest with one)
beside the same pass as one loop that masks every block (the code before, kept below as the reference),
alternately in one process (best of `--reps` each), so the drift of a shared machine hits both alike.
Both must agree; the script stops if they do not. Figures: docs/BENCHMARKS.md (issue 30).
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxwrite.models import KVCache  # noqa: E402
from jaxwrite.models.attention_cache import cache_attention, cache_block, filled_blocks  # noqa: E402
from jaxwrite.models.attention_mask import self_attention_mask  # noqa: E402

KV, GROUPS, HD, BLOCK = 3, 3, 64, 512
_NEG = -1e30


def masked_everywhere(q, k, v, self_allowed, cache: KVCache, block: int):
    """The reference: one loop over the filled key blocks, each masked by the rows' fills. q [B, T, K, G,
    H], k / v [B, K, T, H], self_allowed [B, 1, 1, T, T]; returns [B, T, K, G, H]."""
    batch, seq, kv, groups, hd = q.shape
    rows = groups * seq
    qm = jnp.transpose(q, (0, 2, 3, 1, 4)).reshape(batch, kv, rows, hd)     # [B, K, M, H]
    bk = cache_block(cache.max_len, block)

    def update(carry, kj, vj, allowed):
        m, l, acc = carry
        s = jnp.einsum("BKMH,BKSH->BKMS", qm, kj, preferred_element_type=jnp.float32) * hd ** -0.5
        s = jnp.where(allowed, s, _NEG)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.where(allowed, jnp.exp(s - m_new[..., None]), 0.0)
        alpha = jnp.exp(m - m_new)
        pv = jnp.einsum("BKMS,BKSH->BKMH", p, vj, preferred_element_type=jnp.float32)
        return m_new, alpha * l + p.sum(-1), alpha[..., None] * acc + pv

    def one_block(j, carry):
        start, size = (0, 0, 0, j * bk, 0), (1, batch, kv, bk, hd)
        kj, vj = (jax.lax.dynamic_slice(x, start, size)[0] for x in (cache.k, cache.v))
        filled = (j * bk + jnp.arange(bk))[None, :] < cache.lengths[:, None]
        return update(carry, kj, vj, filled[:, None, None, :])

    init = (jnp.full((batch, kv, rows), _NEG, jnp.float32), jnp.zeros((batch, kv, rows), jnp.float32),
            jnp.zeros((batch, kv, rows, hd), jnp.float32))
    carry = jax.lax.fori_loop(0, filled_blocks(cache.lengths, bk), one_block, init)
    own = jnp.broadcast_to(self_allowed, (batch, 1, groups, seq, seq)).reshape(batch, 1, rows, seq)
    _, l, acc = update(carry, k, v, own)
    out = (acc / jnp.where(l > 0, l, 1.0)[..., None]).reshape(batch, kv, groups, seq, hd)
    return jnp.transpose(out, (0, 3, 1, 2, 4))


def best_ms(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fills", default="1024,2048,3840,7936")
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    normal = lambda *shape: jnp.asarray(rng.standard_normal(shape, np.float32))  # noqa: E731
    mask = self_attention_mask(jnp.ones((1, args.chunk), bool))
    rows = []
    for fill in (int(f) for f in args.fills.split(",")):
        slots = -(-(fill + args.chunk) // BLOCK) * BLOCK
        q = normal(1, args.chunk, KV, GROUPS, HD)
        k, v = normal(1, KV, args.chunk, HD), normal(1, KV, args.chunk, HD)
        cache = KVCache(normal(1, 1, KV, slots, HD), normal(1, 1, KV, slots, HD), jnp.full((1,), fill, jnp.int32))
        new = jax.jit(lambda q, k, v, c: cache_attention(q, k, v, mask, c, 0, BLOCK))
        old = jax.jit(lambda q, k, v, c: masked_everywhere(q, k, v, mask.dense()[:, None, None], c, BLOCK))
        err = float(jnp.max(jnp.abs(new(q, k, v, cache) - old(q, k, v, cache))))
        if err > 1e-5:
            raise SystemExit(f"fill {fill}: the two passes differ by {err}")
        times = {old: [], new: []}
        for _ in range(3):   # alternate, so a slower minute on a shared machine hits both
            for fn, ms in times.items():
                ms.append(best_ms(lambda fn=fn, c=cache, a=(q, k, v): fn(*a, c).block_until_ready(), args.reps))
        row = {"fill": fill, "chunk": args.chunk, "masked_everywhere_ms": min(times[old]),
               "cache_attention_ms": min(times[new]), "max_abs_diff": err, "load": os.getloadavg()[0]}
        rows.append(row)
        print(f"fill {fill:6d}: one masked loop {row['masked_everywhere_ms']:7.2f} ms, cache_attention "
              f"{row['cache_attention_ms']:7.2f} ms (x{row['masked_everywhere_ms'] / row['cache_attention_ms']:.2f}); "
              f"max diff {err:.1e}; load {row['load']:.1f}", flush=True)
    print(json.dumps({"rows": rows}))
    return {"rows": rows}


if __name__ == "__main__":
    main()
