"""Mixed-length generation: continuous batching beside wave batching and transformers' static batches.

    python benchmarks/continuous.py                      # tiny, 64 requests, 16 rows
    python benchmarks/continuous.py --preset small --requests 32

Workload: requests with random prompts (64-256 tokens) and long-tailed output budgets (most short, a
few long, 16-512 tokens), greedy with no EOS so every request generates exactly its budget and the
three runs do identical work. All requests are submitted at t = 0; latency is the time until a
request's last token is available.

- continuous: `Engine.generate(all)`: finished rows are refilled between decode chunks;
- waves: the same engine fed `max_batch` rows at a time, each group run to completion before the
  next starts (what the engine did before continuous batching);
- transformers: `generate` on left-padded batches of `max_batch`, each run to its longest budget
  (rows cannot stop independently without EOS), same weights (saved with save_pretrained, loaded
  with jaxwrite's load_hf).

Each run is preceded by an untimed warm-up of the same run (jit compilation). The last line is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode import _hf_model, _IdsOnly  # noqa: E402


def workload(vocab: int, count: int, seed: int = 0) -> list[tuple[list[int], int]]:
    rng = np.random.default_rng(seed)
    budgets = np.clip(np.round(16 * 2 ** rng.exponential(1.6, count)), 16, 512).astype(int)
    return [(rng.integers(0, vocab, int(rng.integers(64, 257))).tolist(), int(b)) for b in budgets]


def _summary(latencies: list[float], total: float, tokens: int, extra: dict) -> dict:
    lat = np.asarray(latencies)
    return {"total_s": total, "useful_tok_s": tokens / total, "mean_latency_s": float(lat.mean()),
            "p90_latency_s": float(np.percentile(lat, 90)), **extra}


def run_engine(model, work, max_batch: int, waves: bool) -> dict:
    from jaxwrite.infer import Engine, GenerationRequest, SamplingParams
    requests = [GenerationRequest(p, SamplingParams(temperature=0.0, max_new_tokens=b)) for p, b in work]
    engine = Engine(model, _IdsOnly(model.cfg.vocab_size), max_batch=max_batch, eos_ids=[], max_context=1024)
    groups, start = [], 0
    while start < len(requests):
        groups.append(requests[start:start + max_batch] if waves else requests[start:])
        start += max_batch if waves else len(requests)

    def once():
        latencies = []
        begin = time.perf_counter()
        for group in groups:
            for _ in engine.stream(group):
                latencies.append(time.perf_counter() - begin)
        return latencies, time.perf_counter() - begin

    once()                                                         # warm-up: compile every shape
    engine.stats.decode_row_steps = 0
    latencies, total = once()
    tokens = sum(b for _, b in work)
    return _summary(latencies, total, tokens, {"row_utilisation": tokens / engine.stats.decode_row_steps})


def run_transformers(hf_model, work, max_batch: int) -> dict:
    import torch
    torch.set_num_threads(os.cpu_count() or 1)

    def batch_inputs(group):
        width = max(len(p) for p, _ in group)
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for i, (p, _) in enumerate(group):                      # left padding, as generate expects
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        return ids, mask

    def once():
        latencies = []
        begin = time.perf_counter()
        for start in range(0, len(work), max_batch):
            group = work[start:start + max_batch]
            ids, mask = batch_inputs(group)
            longest = max(b for _, b in group)
            with torch.no_grad():
                hf_model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=longest,
                                  min_new_tokens=longest, do_sample=False, pad_token_id=0)
            latencies += [time.perf_counter() - begin] * len(group)
        return latencies, time.perf_counter() - begin

    once()
    latencies, total = once()
    run = sum(max(b for _, b in work[s:s + max_batch]) * len(work[s:s + max_batch])
              for s in range(0, len(work), max_batch))
    tokens = sum(b for _, b in work)
    return _summary(latencies, total, tokens, {"row_utilisation": tokens / run})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args(argv)

    from jaxwrite.models import load_hf
    with tempfile.TemporaryDirectory() as tmp:
        hf_model, path = _hf_model(args.preset, 1024, tmp)
        model = load_hf(path)
        work = workload(model.cfg.vocab_size, args.requests)
        out = {"preset": args.preset, "requests": args.requests, "max_batch": args.max_batch,
               "output_tokens": sum(b for _, b in work), "budgets": sorted(b for _, b in work)}
        out["continuous"] = run_engine(model, work, args.max_batch, waves=False)
        out["waves"] = run_engine(model, work, args.max_batch, waves=True)
        if not args.skip_transformers:
            out["transformers"] = run_transformers(hf_model, work, args.max_batch)
    for name in ("continuous", "waves", "transformers"):
        if name in out:
            r = out[name]
            print(f"{name:>12}: {r['total_s']:7.2f} s, {r['useful_tok_s']:8.0f} useful tok/s, latency mean "
                  f"{r['mean_latency_s']:6.2f} s p90 {r['p90_latency_s']:6.2f} s, rows used {r['row_utilisation']:.0%}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
