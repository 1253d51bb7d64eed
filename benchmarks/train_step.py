"""Training-step throughput on this CPU: jaxwrite's trainer step vs transformers' torch Qwen2, same config.

Config "small": d_model 512, 8 layers, 8 query / 2 KV heads, d_ff 1408, vocab 32,000; batch 8 × seq 512.
One step = forward + backward + AdamW update, fp32 and bf16 compute (jaxwrite: ModelConfig.dtype with
fp32 parameters; torch: autocast bf16 with fp32 parameters). MFU uses the same model FLOPs per token
for both and the measured jitted fp32 matmul peak of this machine. Each variant runs in its own
process, so peak RSS is per variant. Last line of output: a JSON summary.

  python benchmarks/train_step.py [--steps 3] [--variants jax-fp32,jax-bf16,torch-fp32,torch-bf16]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

BATCH, SEQ, THREADS = 8, 512, 2


def _small_config():
    from jaxwrite.models import get_preset
    return get_preset("small")


def _tokens(vocab: int):
    import numpy as np
    return np.random.default_rng(0).integers(0, vocab, (BATCH, SEQ + 1)).astype(np.int32)  # [batch, seq+1]


def run_jax(dtype: str, steps: int) -> dict:
    import jax
    import numpy as np
    import optax
    from flax import nnx

    from jaxwrite.models import Transformer
    from jaxwrite.parallel import DEFAULT_RULES, make_mesh
    from jaxwrite.train import StepFunctions, masked_next_token_loss

    cfg = _small_config().replace(dtype=dtype)
    mesh = make_mesh((1, 1, 1), devices=jax.devices()[:1])
    model = Transformer(cfg, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-4), wrt=nnx.Param)
    fns = StepFunctions(model, optimizer, masked_next_token_loss, mesh, DEFAULT_RULES)
    ids = _tokens(cfg.vocab_size)
    batch = {"tokens": ids[:, :-1], "targets": ids[:, 1:], "loss_mask": np.ones((BATCH, SEQ), np.int32),
             "segment_ids": np.ones((BATCH, SEQ), np.int32),
             "positions": np.broadcast_to(np.arange(SEQ, dtype=np.int32), (BATCH, SEQ)).copy()}
    state = nnx.split((model, optimizer))[1]
    start = time.perf_counter()
    state, metrics = fns.train(state, batch, jax.random.key(0))   # compile + first step
    float(metrics["loss"])
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        state, metrics = fns.train(state, batch, jax.random.key(0))
        loss = float(metrics["loss"])
        times.append(time.perf_counter() - start)
    return {"step_s": min(times), "compile_and_first_step_s": compile_s, "loss": loss}


def run_torch(dtype: str, steps: int) -> dict:
    import contextlib

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    c = _small_config()
    hf = Qwen2Config(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                     num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                     num_key_value_heads=c.num_kv_heads, max_position_embeddings=c.max_seq_len,
                     rope_theta=c.rope_theta, rms_norm_eps=c.rms_eps, tie_word_embeddings=c.tie_embeddings,
                     attn_implementation="sdpa")
    model = Qwen2ForCausalLM(hf).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.from_numpy(_tokens(c.vocab_size)).long()
    inputs, labels = ids[:, :-1], ids[:, 1:]
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bfloat16" else contextlib.nullcontext())

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = model(input_ids=inputs).logits                                 # [batch, seq, vocab]
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, c.vocab_size), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        return float(loss)

    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    times, loss = [], 0.0
    for _ in range(steps):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
    return {"step_s": min(times), "compile_and_first_step_s": first, "loss": loss}


def run_variant(name: str, steps: int) -> dict:
    framework, precision = name.split("-")
    dtype = {"fp32": "float32", "bf16": "bfloat16"}[precision]
    result = (run_jax if framework == "jax" else run_torch)(dtype, steps)
    result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant (best is reported)")
    parser.add_argument("--variants", default="jax-fp32,jax-bf16,torch-fp32,torch-bf16")
    parser.add_argument("--one", help=argparse.SUPPRESS)   # internal: run one variant, print its JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_variant(args.one, args.steps)))
        return

    from jaxwrite.train import measure_matmul_peak
    cfg = _small_config()
    peak = measure_matmul_peak()
    flops_per_token = cfg.flops_per_token(SEQ)
    tokens = BATCH * SEQ
    env = dict(os.environ, XLA_FLAGS=os.environ.get("XLA_FLAGS", "").replace(
        "--xla_force_host_platform_device_count=8", ""))
    results = {}
    for name in args.variants.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", name, "--steps", str(args.steps)],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["tokens_per_sec"] = tokens / r["step_s"]
        r["mfu_of_measured_peak"] = flops_per_token * r["tokens_per_sec"] / peak
        results[name] = r
        print(f"{name:11s} {r['tokens_per_sec']:9.0f} tok/s  step {r['step_s']:.2f}s  "
              f"MFU {100 * r['mfu_of_measured_peak']:.1f}%  peak RSS {r['peak_rss_gb']:.2f} GB  loss {r['loss']:.3f}",
              flush=True)
    summary = {"config": "small", "batch": BATCH, "seq": SEQ, "torch_threads": THREADS, "cpu_count": os.cpu_count(),
               "load_average_1m": os.getloadavg()[0],
               "flops_per_token": flops_per_token, "matmul_peak_flops": peak, "results": results}
    for p in ("fp32", "bf16"):
        if f"jax-{p}" in results and f"torch-{p}" in results:
            summary[f"speedup_vs_torch_{p}"] = (results[f"jax-{p}"]["tokens_per_sec"]
                                                / results[f"torch-{p}"]["tokens_per_sec"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
