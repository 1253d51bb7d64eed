"""The first accelerator's checklist (issue 26 §7): every accelerator-only path against its reference, with
tokens/s, MFU and memory, in one run of a few minutes.

  python benchmarks/device_check.py [--out benchmarks/results/device_check.json] [--budget-s 480] [--small]

Checks, each against the path this project's CI runs on a CPU:
  logprobs    the Pallas log-prob kernels (Triton on GPU, Mosaic on TPU) vs the chunked XLA path: value,
              entropy and both gradients (relative max error), then fwd+bwd tokens/s and temporary HBM of
              each at a 7B-sized LM head
  attention   cuDNN fused attention (GPU) or splash (TPU) vs the reference formula: output and the
              gradients of q, k, v, then fwd+bwd tokens/s of each
  train_step  the trainer's jitted, sharded step (every local device on the data axis) vs an unsharded
              plain forward of the same weights and batch: the loss, then step tokens/s and MFU
  decode      the engine's greedy decode vs argmax of full forward passes: the tokens, then decode tokens/s

On a CPU it runs all of it at small shapes, Pallas in the interpreter, and says so: the figures then
check the script, not a device. Each check is timed against --budget-s and skipped (recorded as such)
once the budget is spent; a check that raises is recorded with its error and the rest still run. The
JSON holds the machine (platform, device kind and count, jax version, host CPU) and every figure; the
last lines printed are a Markdown table for docs/BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np

# A check's own tolerance: relative max error against its reference (bf16 matmuls round at ~1e-2).
TOLERANCE = {"logprobs": 0.02, "attention": 0.05, "train_step": 0.02, "decode": 0.0}


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not np.all(np.isfinite(a)):
        return float("nan")
    return float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-6))


def _timed(fn, *args, repeats: int = 3) -> float:
    """Median seconds of fn(*args) after one warm-up call (which compiles)."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _peak_bytes() -> int | None:
    stats = getattr(jax.devices()[0], "memory_stats", lambda: None)()
    return int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None


def _temp_bytes(fn, *args) -> int | None:
    analysis = jax.jit(fn).lower(*args).compile().memory_analysis()
    return int(analysis.temp_size_in_bytes) if analysis is not None else None


# --- the checks --------------------------------------------------------------------------------
def check_logprobs(small: bool) -> dict:
    from jaxwrite.kernels import LOGPROB_IMPLS
    from jaxwrite.kernels._self_check import compare

    kernel, chunked = LOGPROB_IMPLS.get("pallas"), LOGPROB_IMPLS.get("chunked")
    errors = compare(kernel, chunked, (512, 256, 1024) if not small else (256, 128, 512))
    n, d, v = (1024, 256, 2048) if small else (16384, 3584, 152064)   # 7B: Qwen2.5-7B's head
    k = jax.random.split(jax.random.key(0), 3)
    dtype = jnp.float32 if small else jnp.bfloat16
    h = jax.random.normal(k[0], (n, d), jnp.float32).astype(dtype)                # [N, D]
    w = (0.02 * jax.random.normal(k[1], (d, v), jnp.float32)).astype(dtype)        # [D, V]
    ids = jax.random.randint(k[2], (n,), 0, v)
    out = {"reference": "chunked", "errors": errors, "max_error": max(errors.values()), "shape_NDV": [n, d, v]}
    for name, fn in (("pallas", kernel), ("chunked", chunked)):
        def fwd_bwd(h, w, fn=fn):
            return jax.grad(lambda h, w: jnp.sum(fn(h, w, ids, 1.0, None, None)[0]), argnums=(0, 1))(h, w)
        seconds = _timed(jax.jit(fwd_bwd), h, w)
        out[name] = {"tokens_per_s": n / seconds, "seconds": seconds, "temp_bytes": _temp_bytes(fwd_bwd, h, w)}
    return out


def check_attention(small: bool) -> dict:
    from jaxwrite.models.attention import attend
    from jaxwrite.models.attention_kernels import splash_attention
    from jaxwrite.models.attention_mask import self_attention_mask

    backend = jax.default_backend()
    b, t, n, kv, hd = (1, 256, 4, 2, 128) if small else (2, 4096, 28, 4, 128)
    dtype = jnp.bfloat16
    keys = jax.random.split(jax.random.key(1), 3)
    q = jax.random.normal(keys[0], (b, t, n, hd), jnp.float32).astype(dtype)       # [B, T, N, H]
    k = jax.random.normal(keys[1], (b, kv, t, hd), jnp.float32).astype(dtype)      # [B, K, S, H]
    v = jax.random.normal(keys[2], (b, kv, t, hd), jnp.float32).astype(dtype)
    mask = self_attention_mask(jnp.ones((b, t), bool), None)
    if backend == "gpu":
        impl, fast = "cudnn", lambda q, k, v: attend(q, k, v, mask, "cudnn")
    else:   # TPU, or the interpreter on a CPU
        impl, fast = "splash", lambda q, k, v: splash_attention(q, k, v, mask, min(512, t),
                                                                 interpret=backend == "cpu")
    reference = lambda q, k, v: attend(q, k, v, mask, "reference")  # noqa: E731

    def with_grads(fn):
        def run(q, k, v):
            out, pull = jax.vjp(fn, q, k, v)
            return (out, *pull(jnp.ones_like(out)))
        return jax.jit(run)

    got, want = with_grads(fast)(q, k, v), with_grads(reference)(q, k, v)
    errors = {name: _rel(x.astype(jnp.float32), y.astype(jnp.float32))
              for name, x, y in zip(("out", "dq", "dk", "dv"), got, want)}
    out = {"impl": impl, "reference": "the reference formula", "errors": errors, "max_error": max(errors.values()),
           "shape_BTNKH": [b, t, n, kv, hd]}
    out["timing"] = {}
    for name, fn in ((impl, fast), ("reference", reference)):
        seconds = _timed(with_grads(fn), q, k, v)
        out["timing"][name] = {"tokens_per_s": b * t / seconds, "seconds": seconds}
    return out


def check_train_step(small: bool) -> dict:
    import optax
    from flax import nnx

    from jaxwrite.models import Transformer, get_preset
    from jaxwrite.parallel import DEFAULT_RULES, make_mesh
    from jaxwrite.train import StepFunctions, masked_next_token_loss, total_peak_flops

    devices = jax.devices()
    cfg = get_preset("small" if small else "qwen2.5-0.5b").replace(dtype="bfloat16",
                                                                 vocab_size=4096 if small else 151936)
    rows, seq = (len(devices) * 2, 256) if small else (len(devices) * 8, 2048)
    mesh = make_mesh((len(devices), 1, 1), devices=devices)
    model = Transformer(cfg, nnx.Rngs(0))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg.vocab_size, (rows, seq + 1)).astype(np.int32)
    batch = {"tokens": ids[:, :-1], "targets": ids[:, 1:], "loss_mask": np.ones((rows, seq), np.int32),
             "segment_ids": np.ones((rows, seq), np.int32),
             "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), (rows, seq)).copy()}
    # The reference: the same weights, one plain forward, no mesh, the reference attention.
    plain = nnx.merge(*nnx.split(Transformer(cfg.replace(attention="reference"), nnx.Rngs(0))))
    want = float(jax.jit(lambda m, b: masked_next_token_loss(m, b, None)[0])(plain, {k: jnp.asarray(x)
                                                                                       for k, x in batch.items()}))
    del plain
    optimizer = nnx.Optimizer(model, optax.adamw(1e-5), wrt=nnx.Param)
    fns = StepFunctions(model, optimizer, masked_next_token_loss, mesh, DEFAULT_RULES)
    state = nnx.split((model, optimizer))[1]
    state, metrics = fns.train(state, batch, jax.random.key(0))        # compiles; the loss before any update
    got = float(metrics["loss"])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        state, metrics = fns.train(state, batch, jax.random.key(0))
        float(metrics["loss"])
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    tokens_per_s = rows * seq / seconds
    try:
        peak = total_peak_flops(devices)
    except ValueError:
        peak = None
    flops = cfg.flops_per_token(seq, training=True)
    return {"reference": "unsharded plain forward", "loss": got, "reference_loss": want,
            "max_error": abs(got - want) / abs(want), "devices": len(devices), "rows_x_seq": [rows, seq],
            "params": cfg.param_count(),
            "tokens_per_s": tokens_per_s, "step_s": seconds,
            "mfu": flops * tokens_per_s / peak if peak else None, "peak_bytes": _peak_bytes()}


def check_decode(small: bool) -> dict:
    from flax import nnx

    from jaxwrite.infer import Engine, GenerationRequest, SamplingParams
    from jaxwrite.models import Transformer, get_preset

    class _Ids:   # random token ids need no text
        eos_ids: tuple = ()

        def __init__(self, vocab):
            self.vocab_size = vocab

        def decode(self, ids, skip_special_tokens=True):
            return ""

    cfg = get_preset("small" if small else "qwen2.5-0.5b").replace(vocab_size=4096 if small else 151936,
                                                                 max_seq_len=4096)
    model = Transformer(cfg, nnx.Rngs(0))
    batch, prompt_len, new = (4, 64, 16) if small else (32, 512, 128)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, cfg.vocab_size, prompt_len).tolist() for _ in range(batch)]
    engine = Engine(model, _Ids(cfg.vocab_size), max_batch=batch, eos_ids=[], max_context=prompt_len + new)
    requests = [GenerationRequest(p, SamplingParams(temperature=0.0, max_new_tokens=new)) for p in prompts]
    engine.generate(requests)                                            # compiles every shape
    start = time.perf_counter()
    results = engine.generate(requests)
    seconds = time.perf_counter() - start
    # The reference: greedy by full forward passes (no cache) for the first row, float32 compute.
    steps = min(new, 8)
    ids = list(prompts[0])
    forward = jax.jit(lambda m, t: m(t).logits[0, -1])
    for _ in range(steps):
        ids.append(int(jnp.argmax(forward(model, jnp.asarray([ids])))))
    got = results[0][0].token_ids[:steps]
    mismatches = sum(a != b for a, b in zip(got, ids[prompt_len:]))
    return {"reference": "argmax of full forward passes", "compared_tokens": steps, "mismatches": mismatches,
            "max_error": float(mismatches), "batch_prompt_new": [batch, prompt_len, new],
            "tokens_per_s": batch * new / seconds, "seconds": seconds, "peak_bytes": _peak_bytes()}


CHECKS = {"logprobs": check_logprobs, "attention": check_attention, "train_step": check_train_step,
          "decode": check_decode}


# --- running and reporting ---------------------------------------------------------------------
def machine() -> dict:
    device = jax.devices()[0]
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"platform": device.platform, "device_kind": device.device_kind, "devices": len(jax.devices()),
            "jax": jax.__version__, "host_cpu": cpu, "host_cores": os.cpu_count(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}


def table(results: dict) -> str:
    lines = ["| check | against | max rel. error | ok | tokens/s (fast / reference) | memory |",
             "|---|---|---|---|---|---|"]
    for name, r in results.items():
        if "error" in r or "skipped" in r:
            lines.append(f"| {name} | | | {'skipped' if 'skipped' in r else 'ERROR: ' + r['error']} | | |")
            continue
        if name == "attention":
            name = f"attention ({r['impl']})"
        if name == "logprobs":
            speed = f"{r['pallas']['tokens_per_s']:,.0f} / {r['chunked']['tokens_per_s']:,.0f}"
            memory = f"temp {r['pallas']['temp_bytes'] or 0:,} / {r['chunked']['temp_bytes'] or 0:,} B"
        elif name.startswith("attention"):
            speed = f"{r['timing'][r['impl']]['tokens_per_s']:,.0f} / {r['timing']['reference']['tokens_per_s']:,.0f}"
            memory = ""
        else:
            speed = f"{r['tokens_per_s']:,.0f}" + (f" (MFU {r['mfu']:.1%})" if r.get("mfu") else "")
            memory = f"peak {r['peak_bytes']:,} B" if r.get("peak_bytes") else ""
        lines.append(f"| {name} | {r['reference']} | {r['max_error']:.2e} | {'yes' if r['ok'] else '**no**'} | "
                     f"{speed} | {memory} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/device_check.json")
    parser.add_argument("--budget-s", type=float, default=480.0, help="skip the checks left once this is spent")
    parser.add_argument("--small", action="store_true", help="the CPU shapes on any device (a smoke run)")
    parser.add_argument("--only", default="", help="comma-separated checks (default: all)")
    args = parser.parse_args(argv)
    small = args.small or jax.default_backend() == "cpu"
    if jax.default_backend() == "cpu":
        print("device_check: no accelerator here; running every path at small shapes, Pallas in the "
              "interpreter (the figures check the script, not a device)", file=sys.stderr)
    began = time.perf_counter()
    results = {}
    for name in [c for c in (args.only.split(",") if args.only else CHECKS) if c]:
        if time.perf_counter() - began > args.budget_s:
            results[name] = {"skipped": f"budget of {args.budget_s:.0f} s spent"}
            continue
        start = time.perf_counter()
        try:
            r = CHECKS[name](small)
            r["ok"] = bool(r["max_error"] <= TOLERANCE[name])    # NaN fails
        except Exception as err:  # noqa: BLE001 - one broken path must not hide the others' figures
            r = {"error": f"{type(err).__name__}: {err}".splitlines()[0][:300],
                 "traceback": traceback.format_exc()[-4000:]}
        r["wall_s"] = time.perf_counter() - start
        results[name] = r
        print(f"{name}: {'ok' if r.get('ok') else r.get('error', 'MISMATCH')} ({r['wall_s']:.0f} s)", file=sys.stderr)
    report = {"machine": machine(), "small_shapes": small, "wall_s": time.perf_counter() - began,
              "checks": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, default=float)
    print(table(results))
    return 0 if all(r.get("ok") for r in results.values() if "skipped" not in r) else 1


if __name__ == "__main__":
    sys.exit(main())
