"""Critic SFT from SmolLM2-135M-Instruct beside the same recipe from random init, at equal steps, on held-out
verdicts (Spearman, exact, within-1, parse rate), with a control that must not learn.

  python benchmarks/critic_pretrained.py --workdir /tmp/critic_pretrained --data-dir ../shared/data \\
      [--rule word-share] [--steps 150] [--batch-size 2] [--lr 1e-4] [--seq-len 1280] [--per-criterion 3] \\
      [--only pretrained,scratch,untrained] [--no-control]

The task is the critic demo's (`jaxwrite.quickstart.critic_demo`): rule-teacher verdicts (a transparent
rule, not a model) on the English WritingBench (query, criterion) pairs with the shortest official
critic prompts, split by query. The default rule, `word-share`, scores a 30-word response by the share
of its words in a set of ten vivid-prose adjectives (the rest are weak-prose ones; scores 2, 6, 10):
each word is one token the model knows. The demo's `cjk-share` rule counts CJK characters, which
SmolLM2's byte-level vocabulary splits into byte tokens (at 60 steps neither init learned it). Trained
through configs/critic_sft_tiny.py and scored with the official critic prompt and parse rule in
score-logit mode (non-official; every verdict parses). Three trainings:
  pretrained          model.init_from = pinned:smollm2-135m-instruct, its own tokenizer and chat template,
                      and its control: the same, the teacher's verdicts shuffled across the records (must
                      not learn), in WORKDIR/pretrained/control_shuffled
  scratch             model.preset smollm2-135m: the same shape, tokenizer, data, rate and seed, random init
and the untrained pretrained model's own reading of the held-out set (step 0). One example per row, never
split (on_long=error at --seq-len). A finished run is reused. Writes WORKDIR/summary.json and prints a
markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from grpo_schedules import _machine

MODEL = "pinned:smollm2-135m-instruct"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--rule", default="word-share", help="the rule teacher's rule (rule_teacher.RULES)")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seq-len", type=int, default=1280,
                        help="one example per row; the official prompts here are 974-1,282 tokens")
    parser.add_argument("--remat", default="none",
                        help="model.remat (none: batch 2 x 1,280 tokens fits 24 GiB and saves a forward)")
    parser.add_argument("--num-queries", type=int, default=20)
    parser.add_argument("--per-criterion", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated run names (default: all)")
    parser.add_argument("--no-control", action="store_true",
                        help="train the pretrained critic without its shuffled-verdict control (a quick look)")
    args = parser.parse_args(argv)

    from jaxwrite.evals.critic_agreement import score_agreement
    from jaxwrite.quickstart.critic_demo import run_critic_demo, score_heldout
    from jaxwrite.common import read_jsonl

    # The demo's own rate (1e-2, for a 2-layer random init) would wreck a pretrained model: a fine-tuning
    # rate for both inits, as the RM comparison does.
    recipe = (f"--config.data.seq_len={args.seq_len}", f"--config.data.batch_size={args.batch_size}",
              "--config.data.on_long=error", f"--config.optimizer.learning_rate={args.lr}",
              "--config.optimizer.min_lr_ratio=0.1", "--config.optimizer.warmup_steps=5",
              "--config.optimizer.weight_decay=0.0", f"--config.model.remat={args.remat}")
    runs = {"pretrained": dict(init_checkpoint=MODEL, control=not args.no_control,
                               overrides=("--config.model.preset=",)),
            "scratch": dict(init_checkpoint=None, control=False,
                            overrides=("--config.model.preset=smollm2-135m",))}
    only = [n for n in args.only.split(",") if n]
    os.makedirs(args.workdir, exist_ok=True)
    summary_path = os.path.join(args.workdir, "summary.json")
    summary = {"machine_start": _machine(), "recipe": list(recipe), "steps": args.steps, "rule": args.rule,
               "runs": {}}
    if os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            summary["runs"] = json.load(f).get("runs", {})

    def save():
        summary["machine_end"] = _machine()
        with open(summary_path, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)

    for name, spec in runs.items():
        if (only and name not in only) or name in summary["runs"]:
            continue
        t = time.time()
        result = run_critic_demo(args.data_dir, os.path.join(args.workdir, name), steps=args.steps, seed=0,
                                 num_queries=args.num_queries, per_criterion=args.per_criterion,
                                 tokenizer=MODEL, init_checkpoint=spec["init_checkpoint"],
                                 control=spec["control"], overrides=recipe + spec["overrides"], rule=args.rule)
        control = result.pop("control_shuffled", None)
        summary["runs"][name] = {**result, "seconds": round(time.time() - t, 1)}
        if control:
            summary["runs"][name + "_control"] = control
        save()
        print(name, json.dumps(summary["runs"][name]), flush=True)

    if (not only or "untrained" in only) and "untrained" not in summary["runs"]:
        heldout = os.path.join(args.workdir, "pretrained", "critic_data", "heldout.jsonl")
        if os.path.exists(heldout):   # the same held-out verdicts, read by the model as fetched
            teacher = [r["score"] for _, r in read_jsonl(heldout)]
            summary["runs"]["untrained"] = score_agreement(score_heldout(MODEL, heldout), teacher)
            save()

    def f(x):
        return "n/a" if x is None or x != x else f"{x:.3f}"
    print("\n| critic | Spearman ρ | exact | ±1 | parseable |\n|---|---|---|---|---|")
    for name, run in summary["runs"].items():
        print(f"| {name} | {f(run.get('spearman'))} | {f(run.get('exact'))} | {f(run.get('within1'))} "
              f"| {f(run.get('parseable'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
