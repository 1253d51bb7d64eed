"""Synchronous vs asynchronous (s = 1) vs partial rollouts on the tiny GRPO recipe: do they learn alike?

  python benchmarks/grpo_schedules.py --workdir /tmp/grpo_sched --data-dir ../shared/data \\
      [--seeds 0 1 2] [--stop-at 200] [--modes sync async partial] [--control/--no-control] \\
      [--figure docs/figures/grpo_schedules.png]

configs/grpo_tiny.py as shipped, one policy and reward model for every run (the recipe's own, trained once
into WORKDIR/shared with seed 0), then for each GRPO seed and schedule one run in WORKDIR/<mode>_s<seed>:
  sync     rl.max_staleness 0 (the recipe)
  async    rl.max_staleness 1 (rollouts one update behind, generated while the previous step trains; TIS)
  partial  rl.partial_rollout_tokens 64 (samples longer than 64 new tokens continue next step; TIS)
and a control: the async schedule, seed 0, with every advantage negated (it must not learn), run right
after the seed-0 runs. Every run keeps the recipe's 200-step schedule (learning rate, cosine decay) and
stops after --stop-at steps (a SIGTERM to itself: the trainer saves and returns), so a shorter budget
shows the start of the same curves. Runs go one after another (the machine is shared); a finished run is
reused and a stopped one resumes exactly. Writes WORKDIR/summary.json after every run (first-5 -> last-5
means of the well-formed share, length and writing-RM
rewards, and the mean step seconds and parts per run), prints a markdown table and plots the curves (mean
of the seeds, band = min..max over seeds, 5-step moving average).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
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


def _run(config, workdir: str, stop_at: int, flip: bool = False) -> float:
    """Trains (or resumes, or reuses) one run up to step `stop_at`; returns its wall seconds in this call."""
    from jaxwrite.train import train

    metrics = os.path.join(workdir, "metrics.jsonl")
    if os.path.exists(metrics) and any(r.get("step", 0) >= stop_at for r in _records(metrics)):
        return 0.0

    def stop(info):   # the trainer's own preemption path: save this step, then return 0
        if info.step >= stop_at:
            os.kill(os.getpid(), signal.SIGTERM)

    hooks = [(stop, 1)] if stop_at < config.num_steps else []
    began = time.perf_counter()
    if not flip:
        status = train(config, workdir, hooks)
    else:   # the control: every advantage negated where the update step looks it up (as tests/test_grpo_learns)
        import jaxwrite.rl.grpo as grpo
        original = grpo.row_advantages
        grpo.row_advantages = lambda *a, **k: -original(*a, **k)
        try:
            status = train(config, workdir, hooks)
        finally:
            grpo.row_advantages = original
    if status:
        raise RuntimeError(f"{workdir}: training stopped with status {status}")
    return time.perf_counter() - began


def _summary(workdir: str, stop_at: int) -> dict:
    path = os.path.join(workdir, "metrics.jsonl")
    records = [r for r in _records(path) if r.get("step", 0) <= stop_at]
    means = {k: [float(np.mean(v[:5])), float(np.mean(v[-5:]))]
             for k, _ in CURVES if (v := [r[k] for r in records if k in r])}
    rows = records[1:]                 # the first step compiles
    times = {k: float(np.mean([r[k] for r in rows if k in r])) for k in TIMES if any(k in r for r in rows)}
    return {"first_last": means, "mean_after_step_1": times, "steps": len(rows) + 1}


def _plot(workdir: str, runs: dict[str, list[str]], out: str, stop_at: int) -> None:
    from jaxwrite.common.plots import new_figure, save_figure

    fig, axes = new_figure(15, 4, ncols=len(CURVES))
    for ax, (key, label) in zip(axes, CURVES):
        for mode, dirs in runs.items():
            series = []
            for d in dirs:
                values = [r[key] for r in _records(os.path.join(workdir, d, "metrics.jsonl"))
                          if key in r and r["step"] <= stop_at]
                series.append(np.convolve(values, np.ones(5) / 5, mode="valid"))
            n = min(len(s) for s in series)
            stack = np.stack([s[:n] for s in series])
            x = np.arange(n) + 5
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
    parser.add_argument("--stop-at", type=int, default=200, help="steps per run (the schedule stays 200)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--control", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--figure", default=None)
    args = parser.parse_args(argv)

    from jaxwrite.common import load_config
    from jaxwrite.rl import prepare_grpo
    from jaxwrite.train import TrainConfig

    os.makedirs(args.workdir, exist_ok=True)
    base = load_config("grpo_tiny", ["--config.progress_bar=False"]
                       + ([f"--config.data_dir={args.data_dir}"] if args.data_dir else []))
    shared = prepare_grpo(TrainConfig.from_recipe(base), os.path.join(args.workdir, "shared"))
    summary = {"machine_start": _machine(), "stop_at": args.stop_at, "runs": {}}
    plan = [(mode, seed, False) for seed in args.seeds for mode in args.modes]
    if args.control:   # right after the seed-0 runs, so a cut budget still has it
        plan.insert(min(len(args.modes), len(plan)), ("async", args.seeds[0], True))
    runs: dict[str, list[str]] = {}
    for mode, seed, flip in plan:
        name = f"{'control_' * flip}{mode}_s{seed}"
        config = shared.updated({"seed": seed, **MODES[mode]})
        seconds = _run(config, os.path.join(args.workdir, name), args.stop_at, flip=flip)
        summary["runs"][name] = {**_summary(os.path.join(args.workdir, name), args.stop_at),
                                 "wall_s_this_call": seconds}
        runs.setdefault(f"{'control_' * flip}{mode}", []).append(name)
        summary["machine_end"] = _machine()
        with open(os.path.join(args.workdir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(name, json.dumps(summary["runs"][name]["first_last"]), flush=True)
    _tables(args.workdir, summary, args.stop_at)
    if args.figure:
        _plot(args.workdir, runs, args.figure, args.stop_at)
    return 0


def _tables(workdir: str, summary: dict, stop_at: int) -> None:
    print("| run | well-formed | length | writing RM | step s | update s | rollout wait s |")
    print("|---|---|---|---|---|---|---|")
    for name, run in summary["runs"].items():
        fl, t = run["first_last"], run["mean_after_step_1"]
        cells = [f"{fl[k][0]:.3f} → {fl[k][1]:.3f}" if k in fl else "—" for k, _ in CURVES]
        step = t.get("time/data_s", 0.0) + t.get("time/update_s", 0.0)
        print(f"| {name} | {' | '.join(cells)} | {step:.2f} | {t.get('time/update_s', 0):.2f} | "
              f"{t.get('time/rollout_wait_s', 0):.2f} |")
    # The curves as numbers: each metric's mean over a 5-step window ending at the step named.
    ends = [e for e in range(5, stop_at + 1, 5)]
    for key, label in CURVES:
        print(f"\n{label} (mean of steps e-4..e)\n")
        print("| run | " + " | ".join(str(e) for e in ends) + " |")
        print("|---|" + "---|" * len(ends))
        for name in summary["runs"]:
            values = {r["step"]: r[key] for r in _records(os.path.join(workdir, name, "metrics.jsonl")) if key in r}
            cells = [f"{np.mean([values[s] for s in range(e - 4, e + 1) if s in values]):.2f}"
                     if any(s in values for s in range(e - 4, e + 1)) else "—" for e in ends]
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
