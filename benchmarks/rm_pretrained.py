"""A Bradley–Terry RM from SmolLM2-135M-Instruct beside the same recipe from random init, at equal steps,
on held-out pairs of both pair sets, each against the length-only baseline.

  python benchmarks/rm_pretrained.py --workdir /tmp/rm_pretrained --data-dir ../shared/data \\
      [--wpb-pairs 128] [--wpb-seq-len 512]

Both runs train configs/rm_smollm2_degraded.py (synthetic degraded-passage pairs, whole books held out):
  pretrained  as shipped (model.init_from = pinned:smollm2-135m-instruct), WORKDIR/pretrained
  scratch     model.preset smollm2-135m, the same shape, tokenizer and seed, random init, WORKDIR/scratch
A finished run is reused. Held out: the recipe's own eval pairs (its last eval in metrics.jsonl), and
WritingPreferenceBench pairs (configs/rm_tiny.py's held-out prompts, responses whose mean human scores
differ by >= 1), scored by jaxwrite.train.rm_eval exactly as the trainer builds rows, at --wpb-seq-len
tokens (longer responses cut at the tail). Writes WORKDIR/summary.json and prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from grpo_schedules import _machine, _records

RUNS = {"pretrained": [],
        "scratch": ["--config.model.init_from=", "--config.model.preset=smollm2-135m",
                    "--config.tokenizer.path=pinned:smollm2-135m-instruct"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--wpb-pairs", type=int, default=128)
    parser.add_argument("--wpb-seq-len", type=int, default=512)
    args = parser.parse_args(argv)

    from jaxwrite.common import load_config
    from jaxwrite.train import train
    from jaxwrite.train.rm_eval import evaluate_pairs, held_out_pairs

    data = [f"--config.data_dir={args.data_dir}"]
    wpb = held_out_pairs("rm_tiny", data + [f"--config.data.max_eval_pairs={args.wpb_pairs}"])
    summary = {"machine_start": _machine(), "runs": {}}
    for name, overrides in RUNS.items():
        workdir = os.path.join(args.workdir, name)
        if train(load_config("rm_smollm2_degraded", data + ["--config.progress_bar=False", *overrides]), workdir):
            raise RuntimeError(f"{workdir}: training stopped early")
        evals = [r for r in _records(os.path.join(workdir, "metrics.jsonl")) if "eval/accuracy" in r]
        summary["runs"][name] = {
            "degraded": {"step": evals[-1]["step"], "accuracy": evals[-1]["eval/accuracy"],
                         "length_baseline_accuracy": evals[-1]["eval/length_baseline_accuracy"],
                         "accuracy_at_step_0": evals[0]["eval/accuracy"]},
            "writingpreferencebench": evaluate_pairs(os.path.join(workdir, "checkpoints"), wpb,
                                                     seq_len=args.wpb_seq_len)}
        summary["machine_end"] = _machine()
        with open(os.path.join(args.workdir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(name, json.dumps(summary["runs"][name]), flush=True)
    print("\n| init | degraded pairs: accuracy (step 0 →) | length baseline | WritingPreferenceBench: accuracy "
          "| length baseline |\n|---|---|---|---|---|")
    for name, run in summary["runs"].items():
        d, w = run["degraded"], run["writingpreferencebench"]
        print(f"| {name} | {d['accuracy_at_step_0']:.3f} → {d['accuracy']:.3f} | {d['length_baseline_accuracy']:.3f} "
              f"| {w['accuracy']:.3f} ({w['pairs']} pairs) | {w['length_baseline_accuracy']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
