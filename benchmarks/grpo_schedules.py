"""Synchronous vs asynchronous (s = 1) vs partial rollouts on the tiny GRPO recipe: do they learn alike?

  python benchmarks/grpo_schedules.py --workdir /tmp/grpo_sched --data-dir ../shared/data \\
      [--seeds 0 1 2] [--steps 200] [--modes sync async partial] [--control-steps 60] \\
      [--figure docs/figures/grpo_schedules.png]

configs/grpo_tiny.py as shipped, one policy and reward model for every run (the recipe's own, trained once
into WORKDIR/shared with seed 0), then for each GRPO seed and schedule one run in WORKDIR/<mode>_s<seed>:
  sync     rl.max_staleness 0 (the recipe)
  async    rl.max_staleness 1 (rollouts one update behind, generated while the previous step trains; TIS)
  partial  rl.partial_rollout_tokens 64 (samples longer than 64 new tokens continue next step; TIS)
and a control: the async schedule, seed 0, with every advantage negated (it must not learn). Runs go one
after another (the machine is shared); a finished run is reused and a stopped one resumes exactly.
Writes WORKDIR/summary.json (first-5 -> last-5 means of the well-formed share, length and writing-RM
rewards, and the mean step seconds and parts per run), prints a markdown table and plots the curves (mean
of the seeds, band = min..max over seeds, 10-step moving average).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

MODES = {"sync": {}, "async": {"rl.max_staleness": 1}, "partial": {"rl.partial_rollout_tokens": 64}}
CURVES = (("well_formed_frac", "well-formed share"), ("reward/length/mean", "length reward"),
          ("reward/writing_rm/mean", "writing RM (raw)"))
TIMES = ("time/data_s", "time/update_s", "time/rollout_wait_s", "time/prefill_s", "time/decode_s",
         "time/reward/writing_rm_s", "time/logp_ref_s", "time/weight_sync_s", "rollout/finished_row_share",
         "rollout/staleness_mean", "sampler/kl", "is_weight_mean")


def _records(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _run(config, workdir: str, steps: int, flip: bool = False) -> float:
    """Trains (or resumes, or reuses) one run; returns its wall seconds in this call."""
    from jaxwrite.train import train

    metrics = os.path.join(workdir, "metrics.jsonl")
    if os.path.exists(metrics) and any(r.get("step") == steps for r in _records(metrics)):
        return 0.0
    began = time.perf_counter()
    if not flip:
        status = train(config, workdir)
    else:   # the control: every advantage negated where the update step looks it up (as tests/test_grpo_learns)
        import jaxwrite.rl.grpo as grpo
        original = grpo.row_advantages
        grpo.row_advantages = lambda *a, **k: -original(*a, **k)
        try:
            status = train(config, workdir)
        finally:
            grpo.row_advantages = original
    if status:
        raise RuntimeError(f"{workdir}: training stopped with status {status}")
    return time.perf_counter() - began


def _summary(workdir: str) -> dict:
    from jaxwrite.rl import first_last_means

    path = os.path.join(workdir, "metrics.jsonl")
    means = first_last_means(path, [k for k, _ in CURVES])
    rows = _records(path)[1:]          # the first step compiles
    times = {k: float(np.mean([r[k] for r in rows if k in r])) for k in TIMES if any(k in r for r in rows)}
    return {"first_last": means, "mean_after_step_1": times, "steps": len(rows) + 1}


def _plot(workdir: str, runs: dict[str, list[str]], out: str) -> None:
    from jaxwrite.common.plots import new_figure, save_figure

    fig, axes = new_figure(15, 4, ncols=len(CURVES))
    for ax, (key, label) in zip(axes, CURVES):
        for mode, dirs in runs.items():
            series = []
            for d in dirs:
                values = [r[key] for r in _records(os.path.join(workdir, d, "metrics.jsonl")) if key in r]
                series.append(np.convolve(values, np.ones(10) / 10, mode="valid"))
            n = min(len(s) for s in series)
            stack = np.stack([s[:n] for s in series])
            x = np.arange(n) + 10
            ax.plot(x, stack.mean(0), label=f"{mode} ({len(dirs)} seed{'s' * (len(dirs) > 1)})")
            if len(dirs) > 1:
                ax.fill_between(x, stack.min(0), stack.max(0), alpha=0.2)
        ax.set_xlabel("step")
        ax.set_title(label, fontsize="small")
        ax.legend(fontsize="small")
    save_figure(fig, out, dpi=100)


def _machine() -> dict:
    def run(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            return ""
    model = next((line.split(":", 1)[1].strip() for line in run(["lscpu"]).splitlines()
                  if line.startswith("Model name")), platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "uptime": run(["uptime"])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--control-steps", type=int, default=60, help="0 = no control run")
    parser.add_argument("--figure", default=None)
    args = parser.parse_args(argv)

    from jaxwrite.common import load_config
    from jaxwrite.rl import prepare_grpo
    from jaxwrite.train import TrainConfig

    os.makedirs(args.workdir, exist_ok=True)
    base = load_config("grpo_tiny", ["--config.progress_bar=False"]
                       + ([f"--config.data_dir={args.data_dir}"] if args.data_dir else []))
    shared = prepare_grpo(TrainConfig.from_recipe(base), os.path.join(args.workdir, "shared"))
    summary = {"machine_start": _machine(), "steps": args.steps, "runs": {}}
    plan = [(mode, seed) for seed in args.seeds for mode in args.modes]
    runs: dict[str, list[str]] = {mode: [] for mode in args.modes}
    for mode, seed in plan:
        name = f"{mode}_s{seed}"
        config = shared.updated({"seed": seed, "num_steps": args.steps, **MODES[mode]})
        seconds = _run(config, os.path.join(args.workdir, name), args.steps)
        summary["runs"][name] = {**_summary(os.path.join(args.workdir, name)), "wall_s_this_call": seconds}
        runs[mode].append(name)
        print(name, json.dumps(summary["runs"][name]["first_last"]), flush=True)
    if args.control_steps:
        config = shared.updated({"seed": 0, "num_steps": args.control_steps, **MODES["async"]})
        seconds = _run(config, os.path.join(args.workdir, "control_async_s0"), args.control_steps, flip=True)
        summary["runs"]["control_async_s0"] = {**_summary(os.path.join(args.workdir, "control_async_s0")),
                                               "wall_s_this_call": seconds}
    summary["machine_end"] = _machine()
    with open(os.path.join(args.workdir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print("| run | well-formed | length | writing RM | step s | update s | rollout wait s |")
    print("|---|---|---|---|---|---|---|")
    for name, run in summary["runs"].items():
        fl, t = run["first_last"], run["mean_after_step_1"]
        cells = [f"{fl[k][0]:.3f} → {fl[k][1]:.3f}" if k in fl else "—" for k, _ in CURVES]
        step = t.get("time/data_s", 0.0) + t.get("time/update_s", 0.0)
        print(f"| {name} | {' | '.join(cells)} | {step:.2f} | {t.get('time/update_s', 0):.2f} | "
              f"{t.get('time/rollout_wait_s', 0):.2f} |")
    if args.figure:
        _plot(args.workdir, runs, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
