"""GGUF load time and peak host memory: jaxwrite beside transformers' own GGUF loading, same file, same run.

Each side runs in a fresh process (so peak RSS is its own) loading SmolLM2-135M-Instruct (Q4_1 GGUF, the
test suite's pinned real model; `--gguf` takes another file) into float32 weights plus its tokenizer:

* jaxwrite:     `load_for_inference(path)`: one read of the metadata, weights dequantized and streamed
                into the model, tokenizer and chat template rebuilt from the metadata;
* transformers: `AutoTokenizer.from_pretrained(dir, gguf_file=...)` and
                `AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=torch.float32)`.

Reported: wall time of the load (imports excluded), peak RSS and peak RSS above the process's RSS after
its imports, and the float32 weight bytes for scale. Each side is measured `--repeats` times, alternating.

    python benchmarks/gguf_load.py [--gguf FILE] [--repeats 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from load_memory import _rss_now   # benchmarks/: the same reading of VmRSS


def _measure(side: str, path: str) -> dict:
    if side == "jaxwrite":
        import jax

        from jaxwrite.infer import load_for_inference
        jax.numpy.zeros(1).block_until_ready()     # the backend up before the baseline
        base, began = _rss_now(), time.perf_counter()
        model, tokenizer = load_for_inference(path)
        jax.block_until_ready(jax.tree.leaves(model))
        params = model.cfg.param_count()
    else:
        import torch
        import transformers
        folder, name = os.path.split(path)
        base, began = _rss_now(), time.perf_counter()
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        params = sum(p.numel() for p in model.parameters())
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert tokenizer is not None
    return {"side": side, "seconds": seconds, "baseline_rss": base, "peak_rss": peak, "params": params}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", default="", help="GGUF file (default: the pinned SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(_measure(*args.measure)))
        return
    path = args.gguf
    if not path:
        from jaxwrite.common.pinned_models import fetch_pinned
        path = fetch_pinned("smollm2-135m-instruct")
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="", TRANSFORMERS_VERBOSITY="error")
    runs: dict[str, list[dict]] = {"jaxwrite": [], "transformers": []}
    for _ in range(args.repeats):
        for side in runs:
            out = subprocess.run([sys.executable, __file__, "--measure", side, path], check=True,
                                 capture_output=True, text=True, env=env).stdout
            runs[side].append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for side, found in runs.items():
        rows.append({"side": side, "file_bytes": os.path.getsize(path), "params": found[0]["params"],
                     "seconds_median": round(statistics.median(r["seconds"] for r in found), 2),
                     "seconds_all": [round(r["seconds"], 2) for r in found],
                     "peak_rss_gib": round(max(r["peak_rss"] for r in found) / 2**30, 3),
                     "peak_above_imports_gib": round(max(r["peak_rss"] - r["baseline_rss"] for r in found) / 2**30, 3)})
    if args.json:
        print(json.dumps({"gguf": path, "rows": rows}, indent=2))
        return
    print(f"{os.path.basename(path)}: {rows[0]['file_bytes'] / 2**20:.1f} MiB file, {rows[0]['params'] / 1e6:.1f}M "
          f"parameters ({rows[0]['params'] * 4 / 2**30:.2f} GiB in float32)")
    print("| loader | load time (median of %d) | peak RSS | peak RSS above imports |" % args.repeats)
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['side']} | {r['seconds_median']:.2f} s ({', '.join(map(str, r['seconds_all']))}) | "
              f"{r['peak_rss_gib']:.2f} GiB | {r['peak_above_imports_gib']:.2f} GiB |")


if __name__ == "__main__":
    main()
