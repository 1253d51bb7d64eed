"""Host memory needed to load a Qwen2.5-7B-shaped Hugging Face checkpoint with `load_hf`.

Writes a checkpoint with the real 7B tensor shapes (vocab 152,064, d_model 3,584, d_ff 18,944, 28/4 heads)
and `--layers` of its 28 layers, as bf16 safetensors shards, then loads it in a fresh process and reports
the peak resident memory above the process baseline, relative to the checkpoint size. On CPU the loaded
model itself lives in host memory, so the floor is 1.0x; a load that materialised a full host copy first
would show >= 2.0x.

    python benchmarks/load_memory.py --layers 2 --json
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np


def write_checkpoint(path: str, layers: int) -> int:
    import ml_dtypes
    from safetensors.numpy import save_file

    from jaxwrite.models import config_to_hf, get_preset

    cfg = get_preset("qwen2.5-7b").replace(num_layers=layers)
    d, h, k, dh, f, v = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.dim_head, cfg.d_ff, cfg.vocab_size
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(0)

    def t(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(bf16)

    weight_map, total = {}, 0
    shards = [{"model.embed_tokens.weight": t(v, d), "model.norm.weight": t(d)}, {"lm_head.weight": t(v, d)}]
    for i in range(layers):
        p = f"model.layers.{i}."
        shards.append({p + "self_attn.q_proj.weight": t(h * dh, d), p + "self_attn.q_proj.bias": t(h * dh),
                       p + "self_attn.k_proj.weight": t(k * dh, d), p + "self_attn.k_proj.bias": t(k * dh),
                       p + "self_attn.v_proj.weight": t(k * dh, d), p + "self_attn.v_proj.bias": t(k * dh),
                       p + "self_attn.o_proj.weight": t(d, h * dh), p + "mlp.gate_proj.weight": t(f, d),
                       p + "mlp.up_proj.weight": t(f, d), p + "mlp.down_proj.weight": t(d, f),
                       p + "input_layernorm.weight": t(d), p + "post_attention_layernorm.weight": t(d)})
    for n, tensors in enumerate(shards):
        name = f"model-{n + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, os.path.join(path, name), metadata={"format": "pt"})
        weight_map.update({key: name for key in tensors})
        total += sum(a.nbytes for a in tensors.values())
        shards[n] = None  # free as we go
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(config_to_hf(cfg, dtype="bfloat16"), fh)
    return total


def _rss_now() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(path: str) -> dict:
    import jax

    from jaxwrite.models import load_hf

    jax.numpy.zeros(1).block_until_ready()  # initialise the backend before the baseline
    base = _rss_now()
    model = load_hf(path, dtype="bfloat16")
    jax.block_until_ready(jax.tree.leaves(model))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"baseline_rss": base, "peak_rss": peak, "after_rss": _rss_now()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2, help="how many of the 28 layers to write")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        size = write_checkpoint(tmp, args.layers)
        out = subprocess.run([sys.executable, __file__, "--measure", tmp], check=True, capture_output=True,
                             text=True, env=dict(os.environ, JAX_PLATFORMS="cpu")).stdout
        m = json.loads(out.strip().splitlines()[-1])
    result = {"layers": args.layers, "checkpoint_bytes": size,
              "peak_delta_bytes": m["peak_rss"] - m["baseline_rss"],
              "peak_over_checkpoint": round((m["peak_rss"] - m["baseline_rss"]) / size, 3)}
    print(json.dumps(result) if args.json else
          f"checkpoint {size / 2**30:.2f} GiB, peak host memory above baseline "
          f"{result['peak_delta_bytes'] / 2**30:.2f} GiB = {result['peak_over_checkpoint']:.2f}x")


if __name__ == "__main__":
    main()
