"""How long a whole WritingBench scoring run takes with the paper's 7B critic on a TPU slice: an ESTIMATE
composed from compiled engine steps (`jaxwrite.aot.scoring_estimate`), at the benchmark's real prompt lengths.

1. Prompt lengths: every one of the 5,000 critic calls (1,000 queries x 5 criteria) is built with the official
   messages (`jaxwrite.prompts.critic_messages`, response left empty), rendered in Qwen2.5's ChatML
   (system, user, then the assistant's turn opened) and counted with Qwen's byte-level BPE tokenizer (the
   pinned `qwen-tokenizer`: Qwen3's files, whose 151,643-token vocabulary, merges and pre-tokenizer are
   Qwen2.5's; `jaxwrite.common.pinned_models`). The response under judgement is the model under test's, not
   in the benchmark file: each scenario adds `--response-tokens` to every prompt.
2. Steps: the critic recipe's model (`configs/critic_sft_qwen2.5_7b.py`, Qwen2.5-7B) compiled by libtpu for
   each slice's compile-only devices at every cache bucket the run visits, prefill (512-token chunks) and
   sampled decode (the official sampling: temperature 1.0, top_p 0.95), for `rows` rows at once.
3. The run: the calls in benchmark order, `rows` at a time, prefilled then decoded `--verdict-tokens` steps
   (an assumed verdict length: the critic's JSON with its reason; the official budget is 2,048), or, in
   score_logit mode, prefilled only.

Results (compiled step costs included, so a re-run recompiles nothing) go to
benchmarks/results/writingbench_estimate.json; the table printed is the one in docs/TPU.md.

    python benchmarks/writingbench_full_estimate.py [--slices v5e-8,v6e-8] [--response-tokens 1000,3000]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

RESULTS = pathlib.Path(__file__).parent / "results" / "writingbench_estimate.json"
RECIPE = "configs/critic_sft_qwen2.5_7b.py"
# Served as `jaxwrite serve --model CRITIC --dtype bfloat16 --mesh 2,1,4 --max-batch 32`: weights in bfloat16
# (the checkpoint's dtype; the training recipe keeps float32 master weights), tensor parallel 4 (a 7B replica
# in 3.8 GB per chip), two replicas per 8-chip slice, serve's default 32 rows over both.
SERVING = ["--config.model.param_dtype=bfloat16"]
SLICES = {"v5e-8": ((2, 1, 4), 32), "v6e-8": ((2, 1, 4), 32)}


def prompt_lengths(data_dir: str | None) -> list[int]:
    from jaxwrite.common.pinned_models import fetch_pinned
    from jaxwrite.evals import load_writingbench
    from jaxwrite.prompts import critic_messages
    from jaxwrite.text import load_tokenizer

    tokenizer = load_tokenizer(fetch_pinned("qwen-tokenizer"))
    lengths = []
    for query in load_writingbench(data_dir).values():
        for criterion in query.checklist:
            messages = critic_messages(query.query, criterion, "")
            text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
            lengths.append(len(tokenizer.encode(text + "<|im_start|>assistant\n")))
    return lengths


def _load() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def _save(results: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")


def _costs(results: dict, slice_name: str, buckets: list[int]):
    """{bucket: BucketCosts}, compiling only the buckets not in the results file yet."""
    from jaxwrite.aot.scoring_estimate import BucketCosts, StepCost, scoring_costs
    from jaxwrite.train import load_recipe

    mesh, rows = SLICES[slice_name]
    stored = results.setdefault("steps", {}).setdefault(slice_name, {})
    missing = [b for b in buckets if str(b) not in stored]
    for bucket in missing:   # one at a time, saved as it comes: a killed run keeps what it compiled
        began = time.perf_counter()
        cost = scoring_costs(load_recipe(RECIPE, SERVING), slice_name, mesh=mesh, rows=rows, buckets=[bucket],
                             progress=lambda m: print(m, file=sys.stderr, flush=True))[bucket]
        stored[str(bucket)] = {"prefill": dataclasses.asdict(cost.prefill), "decode": dataclasses.asdict(cost.decode),
                               "compile_s": time.perf_counter() - began}
        _save(results)
    return {b: BucketCosts(b, StepCost(**stored[str(b)]["prefill"]), StepCost(**stored[str(b)]["decode"]))
            for b in buckets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", default="v5e-8,v6e-8")
    parser.add_argument("--response-tokens", default="1000,3000", help="response lengths of the scenarios")
    parser.add_argument("--verdict-tokens", type=int, default=256, help="assumed verdict length (generate mode)")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    from jaxwrite.aot.scoring_estimate import buckets_needed, estimate_run, length_summary

    results = _load()
    if "prompt_tokens" not in results:
        results["prompt_tokens"] = prompt_lengths(args.data_dir)
        _save(results)
    base = results["prompt_tokens"]
    results["prompt_tokens_summary"] = length_summary(base)
    scenarios = [(r, mode, v) for r in map(int, args.response_tokens.split(","))
                 for mode, v in (("generate", args.verdict_tokens), ("generate", 2048), ("score_logit", 0))]
    rows_out = []
    for slice_name in args.slices.split(","):
        mesh, rows = SLICES[slice_name]
        need = sorted({b for r, mode, v in scenarios
                       for b in buckets_needed([p + r for p in base], v, rows, mode == "generate")})
        costs = _costs(results, slice_name, need)
        for response, mode, verdict in scenarios:
            run = estimate_run([p + response for p in base], verdict, costs, rows, generate=mode == "generate")
            rows_out.append({"slice": slice_name, "mesh": list(mesh), "rows": rows, "response_tokens": response,
                             "mode": mode, "verdict_tokens": verdict, **run.as_json()})
    results["estimates"] = rows_out
    _save(results)
    s = results["prompt_tokens_summary"]
    print(f"critic prompt tokens without the response (5,000 calls): mean {s['mean']:.0f}, median {s['median']}, "
          f"p90 {s['p90']}, p99 {s['p99']}, max {s['max']}")
    print("| slice | mesh (data, fsdp, tensor) | rows | response tokens | mode | verdict tokens | prefill min | "
          "decode min | total min (ESTIMATE) | queries/s | fits |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows_out:
        print(f"| {r['slice']} | {tuple(r['mesh'])} | {r['rows']} | {r['response_tokens']:,} | {r['mode']} | "
              f"{r['verdict_tokens'] or '-'} | {r['prefill_s'] / 60:.1f} | {r['decode_s'] / 60:.1f} | "
              f"{r['minutes']:.1f} | {r['queries_per_s']:.2f} | {'yes' if r['fits'] else 'NO'} |")


if __name__ == "__main__":
    main()
