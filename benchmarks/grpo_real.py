"""GRPO from a real instruct model (configs/grpo_smollm2.py): does it learn the requested lengths on
held-out prompts, and does a negated-advantage control not?

  python benchmarks/grpo_real.py --workdir /tmp/grpo_real --data-dir ../shared/data \\
      [--stop-at 30] [--control/--no-control] [--eval-prompts 16] [--eval-samples 4] [--figure F.png]

One warm-up policy and writing RM for every run (the recipe's own, trained once into WORKDIR/shared), then
  grpo      the recipe as shipped, WORKDIR/grpo
  control   the same with every advantage negated (it must not learn), WORKDIR/control
Each run stops after --stop-at steps (the trainer's own preemption path; a stopped run resumes exactly,
a finished one is reused). Held-out evaluation, of the warm-up policy (the start) and of each run's last
checkpoint: `jaxwrite generate --think-answer en` on LongWriter-style range requests whose topics no
training prompt has (rl/length_task.py, held_out), the recipe's own sampling (its temperature, top-p and token cap),
scored per sample: in range (well-formed and the answer's word count inside the request), well-formed,
the format reward's repetition penalty of the answer (0 = none), and the answer's words. Writes
WORKDIR/summary_stepN_nS.json after each piece, prints markdown tables (held-out, and the training curves as
5-step means) and plots the training curves.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from grpo_schedules import _machine, _records, _run

CURVES = (("in_range_frac", "in-range share"), ("well_formed_frac", "well-formed share"),
          ("reward/length/mean", "length reward"), ("repetition", "repetition penalty"),
          ("reward/writing_rm/mean", "writing RM (raw)"))


def held_out_prompts(config, path: str, count: int) -> list:
    from jaxwrite.rl.length_task import length_control_prompts

    task = config.rl.length_task
    prompts = length_control_prompts(count, task.min_words, task.max_words, config.rl.max_new_tokens,
                                     seed=1000, style=task.style, held_out=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps({"id": p.id, "query": p.text}) + "\n")
    return prompts


def evaluate(model: str, prompts: list, prompts_path: str, out: str, config, samples: int) -> dict:
    """Held-out scores of one policy (generation resumes by id, so a cut evaluation continues)."""
    from jaxwrite.rl.repetition import repetition_penalty
    from jaxwrite.text import count_words

    cmd = [sys.executable, "-m", "jaxwrite", "generate", "--model", model, "--input", prompts_path,
           "--output", out, "--think-answer", "en", "--temperature", str(config.rl.temperature),
           "--top-p", str(config.rl.top_p),
           "--max-new-tokens", str(config.rl.max_new_tokens), "--num-samples", str(samples), "--seed", "7"]
    # The child runs on this process's backend: a libtpu that failed to find a TPU here leaves TPU_* settings
    # behind that would make the child look for a pod slice.
    import jax
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS") or jax.default_backend()}
    subprocess.run(cmd, check=True, env=env)
    by_id = {r["id"]: r for r in _records(out)}
    rows = []
    for p in prompts:
        rec = by_id[p.id]
        for answer, ok in zip(rec["responses"], rec["well_formed"]):
            words = count_words(answer) if ok else 0
            rows.append({"in_range": bool(ok and p.lower <= words <= p.upper), "well_formed": bool(ok),
                         "repetition": repetition_penalty(answer) if ok else None, "words": words if ok else None})
    formed = [r for r in rows if r["well_formed"]]
    return {"samples": len(rows), "in_range": float(np.mean([r["in_range"] for r in rows])),
            "well_formed": len(formed) / len(rows),
            "repetition": float(np.mean([r["repetition"] for r in formed])) if formed else None,
            "words": float(np.mean([r["words"] for r in formed])) if formed else None}


def _curves(workdir: str, stop_at: int) -> dict:
    records = [r for r in _records(os.path.join(workdir, "metrics.jsonl")) if r.get("step", 0) <= stop_at]
    rows = records[1:]   # the first step compiles
    for r in records:     # the format reward is 1 per well-formed sample minus its repetition penalty
        if "reward/format/mean" in r:
            r["repetition"] = r["well_formed_frac"] - r["reward/format/mean"]
    out = {k: [r[k] for r in records if k in r] for k, _ in CURVES}
    steps = [r.get("time/data_s", 0) + r.get("time/update_s", 0) for r in rows]
    out["step_s"] = float(np.mean(steps)) if steps else None
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--recipe", default="grpo_smollm2")
    parser.add_argument("--stop-at", type=int, default=30)
    parser.add_argument("--control", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--no-grpo", action="store_true", help="run only the control (e.g. to a shorter --stop-at "
                                                               "than the recipe's run)")
    parser.add_argument("--eval-prompts", type=int, default=16)
    parser.add_argument("--eval-samples", type=int, default=4)
    parser.add_argument("--figure", default=None)
    parser.add_argument("overrides", nargs="*", help="--config.KEY=VALUE overrides of the recipe")
    args = parser.parse_args(argv)

    from jaxwrite.common import load_config
    from jaxwrite.rl import prepare_grpo
    from jaxwrite.train import TrainConfig

    os.makedirs(args.workdir, exist_ok=True)
    base = load_config(args.recipe, ["--config.progress_bar=False", *args.overrides]
                       + ([f"--config.data_dir={args.data_dir}"] if args.data_dir else []))
    shared = prepare_grpo(TrainConfig.from_recipe(base), os.path.join(args.workdir, "shared"))
    # Named by step and sample count: generation resumes by id, so a later, longer call must not reuse them.
    summary_path = os.path.join(args.workdir, f"summary_step{args.stop_at}_n{args.eval_samples}.json")
    summary = {"machine_start": _machine(), "stop_at": args.stop_at, "overrides": args.overrides, "held_out": {},
               "runs": {}}

    def save():
        summary["machine_end"] = _machine()
        with open(summary_path, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)

    prompts_path = os.path.join(args.workdir, "held_out_prompts.jsonl")
    prompts = held_out_prompts(shared, prompts_path, args.eval_prompts)
    summary["held_out"]["start"] = evaluate(shared.model.init_from, prompts, prompts_path,
                                            os.path.join(args.workdir, f"held_out_start_n{args.eval_samples}.jsonl"),
                                            shared,
                                            args.eval_samples)
    save()
    print("start", json.dumps(summary["held_out"]["start"]), flush=True)
    for name, flip in [("grpo", False)] * (not args.no_grpo) + [("control", True)] * args.control:
        run_dir = os.path.join(args.workdir, name)
        seconds = _run(shared, run_dir, args.stop_at, flip=flip)
        summary["runs"][name] = {"curves": _curves(run_dir, args.stop_at), "wall_s_this_call": seconds}
        summary["held_out"][name] = evaluate(os.path.join(run_dir, "checkpoints"), prompts, prompts_path,
                                             os.path.join(args.workdir,
                                                          f"held_out_{name}_step{args.stop_at}_n{args.eval_samples}.jsonl"),
                                             shared,
                                             args.eval_samples)
        save()
        print(name, json.dumps(summary["held_out"][name]), flush=True)
    _tables(summary, args.stop_at)
    if args.figure:
        _plot(summary, args.figure)
    return 0


def _tables(summary: dict, stop_at: int) -> None:
    def cell(v, fmt="{:.2f}"):
        return "—" if v is None else fmt.format(v)

    print("\n| held-out policy | in range | well-formed | repetition | words |\n|---|---|---|---|---|")
    for name, h in summary["held_out"].items():
        print(f"| {name} ({h['samples']} samples) | {cell(h['in_range'])} | {cell(h['well_formed'])} | "
              f"{cell(h['repetition'], '{:.3f}')} | {cell(h['words'], '{:.0f}')} |")
    ends = list(range(5, stop_at + 1, 5))
    for key, label in CURVES:
        print(f"\n{label} (training rollouts, mean of steps e-4..e)\n")
        print("| run | " + " | ".join(str(e) for e in ends) + " |\n|---|" + "---|" * len(ends))
        for name, run in summary["runs"].items():
            values = run["curves"][key]
            cells = [cell(float(np.mean(values[e - 5:e]))) if len(values) >= e else "—" for e in ends]
            print(f"| {name} | " + " | ".join(cells) + " |")


def _plot(summary: dict, out: str) -> None:
    from jaxwrite.common.plots import new_figure, save_figure

    fig, axes = new_figure(18, 4, ncols=len(CURVES))
    for ax, (key, label) in zip(axes, CURVES):
        for name, run in summary["runs"].items():
            values = run["curves"][key]
            if len(values) >= 5:
                ax.plot(np.arange(len(values) - 4) + 5, np.convolve(values, np.ones(5) / 5, mode="valid"), label=name)
        ax.set_xlabel("step")
        ax.set_title(label, fontsize="small")
        ax.legend(fontsize="small")
    save_figure(fig, out, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
