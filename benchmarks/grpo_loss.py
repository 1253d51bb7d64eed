"""GRPO policy loss + gradient at Qwen2.5 scale: naive full logits vs chunked XLA vs the fused path.

The loss is training's: token log-probs from a `jaxwrite.kernels` implementation, group advantages
computed inside the same jit from each row's group rewards, and `jaxwrite.rl.grpo_policy_loss`.
Rows of 16 tokens (the first a masked prompt token) in groups of 8, so N must be a multiple of 128.
Hidden 896 (Qwen2.5-0.5B), vocabulary 151,936. For each implementation: peak temporary memory from
XLA's compiled memory analysis, and the median wall time of `--repeats` runs after one warm-up run.
"fused" is whatever `impl="auto"` picks here (chunked on CPU and GPU, Pallas on TPU) unless
`--fused-impl` names one; when that is the chunked path itself its figures are reused rather than
measured twice.

    python benchmarks/grpo_loss.py --quick --json      # last line: one JSON object
    python benchmarks/grpo_loss.py --fused-impl pallas # on a GPU: time the Triton kernels themselves
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.kernels import resolve_impl, token_logprobs
from jaxwrite.rl import group_rows, grpo_policy_loss, row_advantages

ROW, GROUP, REWARDS = 16, 8, 3   # tokens per completion row, rows per prompt group, reward components


def _inputs(tokens: int, hidden: int, vocab: int, dtype) -> tuple:
    k = jax.random.split(jax.random.key(0), 5)
    h = jax.random.normal(k[0], (tokens, hidden), jnp.float32).astype(dtype)  # [N, D]
    w = (0.02 * jax.random.normal(k[1], (hidden, vocab), jnp.float32)).astype(dtype)  # [D, V]
    ids = jax.random.randint(k[2], (tokens,), 0, vocab)
    rows = tokens // ROW
    logp_old = -jnp.log(float(vocab)) + 0.1 * jax.random.normal(k[3], (rows, ROW))  # near-uniform policy
    rewards = np.asarray(jax.random.uniform(k[4], (rows // GROUP, GROUP, REWARDS)))  # [P, G, R]
    groups = {name: jnp.asarray(v) for name, v in group_rows(rewards).items()}
    mask = (jnp.arange(tokens) % ROW != 0).astype(jnp.float32).reshape(rows, ROW)  # prompt tokens masked out
    return h, w, ids, logp_old, groups, mask


def measure(impl: str, inputs: tuple, repeats: int, block_tokens: int | None, block_vocab: int | None) -> dict:
    h, w, ids, logp_old, groups, mask = inputs

    def loss(h, w):
        logp, _ = token_logprobs(h, w, ids, temperature=0.8, impl=impl, block_tokens=block_tokens,
                                 block_vocab=block_vocab)                                  # [N]
        advantages = row_advantages(groups["group_rewards"], groups["group_index"])         # [N / ROW]
        return grpo_policy_loss(logp.reshape(mask.shape), logp_old, advantages, mask, eps_low=0.2,
                                eps_high=0.28)[0]

    compiled = jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(h, w).compile()
    peak = compiled.memory_analysis().temp_size_in_bytes
    out = jax.block_until_ready(compiled(h, w))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(h, w))
        times.append(time.perf_counter() - start)
    loss_value, (dh, _) = out
    return {"peak_bytes": int(peak), "seconds": statistics.median(times), "loss": float(loss_value),
            "dh": np.asarray(dh, np.float32)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="512 tokens, 3 timed runs (CPU: < 5 minutes)")
    parser.add_argument("--tokens", type=int, help="tokens N (default 512 quick, 4096 otherwise)")
    parser.add_argument("--hidden", type=int, default=896)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--repeats", type=int, help="timed runs per implementation (default 3 quick, 5)")
    parser.add_argument("--block-tokens", type=int, help="token tile (default: each implementation's own)")
    parser.add_argument("--block-vocab", type=int, help="vocabulary tile (default: each implementation's own)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--fused-impl", default="auto", help="implementation timed as 'fused' (default: auto)")
    args = parser.parse_args()
    tokens = args.tokens or (512 if args.quick else 4096)
    if tokens % (ROW * GROUP):
        parser.error(f"--tokens {tokens}: expected a multiple of {ROW * GROUP} (rows of {ROW} in groups of {GROUP})")
    repeats = args.repeats or (3 if args.quick else 5)
    inputs = _inputs(tokens, args.hidden, args.vocab, jnp.dtype(args.dtype))
    fused_impl = resolve_impl(args.fused_impl)

    results = {}
    for name, impl in (("naive", "reference"), ("chunked", "chunked"), ("fused", fused_impl)):
        if impl == "chunked" and "chunked" in results:
            results[name] = results["chunked"]
            continue
        results[name] = measure(impl, inputs, repeats, args.block_tokens, args.block_vocab)
        print(f"{name:8s} impl={impl:9s} peak temp {results[name]['peak_bytes'] / 2**20:9.1f} MiB  "
              f"median {results[name]['seconds']:.3f} s  loss {results[name]['loss']:.6f}", flush=True)

    naive = results["naive"]
    summary = {"tokens": tokens, "hidden": args.hidden, "vocab": args.vocab, "dtype": args.dtype,
               "backend": jax.default_backend(), "fused_impl": fused_impl, "repeats": repeats}
    for name, r in results.items():
        summary[f"{name}_peak_bytes"] = r["peak_bytes"]
        summary[f"{name}_seconds"] = round(r["seconds"], 4)
        summary[f"{name}_peak_vs_naive"] = round(r["peak_bytes"] / naive["peak_bytes"], 4)
        summary[f"{name}_time_vs_naive"] = round(r["seconds"] / naive["seconds"], 3)
        # The implementations must agree before their figures mean anything.
        summary[f"{name}_dh_max_rel_diff"] = float(np.max(np.abs(r["dh"] - naive["dh"])) / np.max(np.abs(naive["dh"])))
    if not args.json:
        return 0
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
