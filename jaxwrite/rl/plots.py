"""Reward and length curves from a GRPO run's metrics jsonl (one `rollout_step_metrics` line per step)."""
from __future__ import annotations

import os

# A bare Figure renders with Agg and leaves pyplot's global backend and figure list alone.
from matplotlib.figure import Figure

from jaxwrite.common import InputError, read_jsonl

_LENGTH_KEYS = ("answer_words/mean", "answer_words/p50", "answer_words/p90", "think_words/mean")
_HEALTH_KEYS = ("truncated_frac", "zero_variance_prompt_frac", "well_formed_frac")


def plot_reward_curves(metrics_jsonl: str | os.PathLike, out_png: str | os.PathLike) -> None:
    """Three panels against `step`: mean raw rewards, answer/think lengths, and batch health."""
    rows = [(line, rec) for line, rec in read_jsonl(metrics_jsonl, required=("step",))]
    if not rows:
        raise InputError("expected at least one metrics line", path=os.fspath(metrics_jsonl))
    for line, rec in rows:
        if not isinstance(rec["step"], int):
            raise InputError("expected an integer", path=os.fspath(metrics_jsonl), line=line, field="step")
    records = sorted((rec for _, rec in rows), key=lambda r: r["step"])
    reward_keys = sorted({k for r in records for k in r if k.startswith("reward/") and k.endswith("/mean")})

    fig = Figure(figsize=(15, 4))
    axes = fig.subplots(1, 3)
    panels = ((axes[0], reward_keys, "raw reward (mean)"), (axes[1], _LENGTH_KEYS, "words"),
              (axes[2], _HEALTH_KEYS, "fraction of batch"))
    for ax, keys, ylabel in panels:
        for key in keys:
            points = [(r["step"], r[key]) for r in records if key in r]
            if points:
                steps, values = zip(*points)
                name = key[len("reward/"):-len("/mean")] if key.startswith("reward/") else key
                ax.plot(steps, values, label=name)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        if ax.has_data():
            ax.legend(fontsize="small")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.fspath(out_png)) or ".", exist_ok=True)
    fig.savefig(out_png, dpi=100)
