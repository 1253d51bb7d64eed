"""Reward and length curves from a GRPO run's metrics jsonl (one `rollout_step_metrics` line per step),
and the first-steps vs last-steps summary that says whether a run learnt."""
from __future__ import annotations

import os

from jaxwrite.common import InputError, read_jsonl
from jaxwrite.common.plots import new_figure, plot_series, save_figure

_LENGTH_KEYS = ("answer_words/mean", "answer_words/p50", "answer_words/p90", "think_words/mean")
_HEALTH_KEYS = ("well_formed_frac", "truncated_frac", "zero_variance_prompt_frac")
# What "GRPO learnt" is judged on: every reward's mean and the share of well-formed samples.
LEARNING_KEYS = ("well_formed_frac",)


def _rollout_records(metrics_jsonl: str | os.PathLike) -> list[dict]:
    """Metrics lines sorted by step (every line, including ones without rollout metrics)."""
    rows = [(line, rec) for line, rec in read_jsonl(metrics_jsonl, required=("step",))]
    if not rows:
        raise InputError("expected at least one metrics line", path=os.fspath(metrics_jsonl))
    for line, rec in rows:
        if not isinstance(rec["step"], int):
            raise InputError("expected an integer", path=os.fspath(metrics_jsonl), line=line, field="step")
    return sorted((rec for _, rec in rows), key=lambda r: r["step"])


def _reward_keys(records: list[dict]) -> list[str]:
    return sorted({k for r in records for k in r if k.startswith("reward/") and k.endswith("/mean")})


def first_last_means(metrics_jsonl: str | os.PathLike, keys=None, window: int = 5) -> dict[str, tuple[float, float]]:
    """{metric: (mean over its first `window` logged steps, mean over its last `window`)}.

    keys: default every `reward/<name>/mean` plus the well-formed fraction. Only steps that logged
    the metric count (with updates_per_rollout > 1, rollout metrics appear on every N-th step). A
    metric logged fewer than 2 x window times still gets both means, from overlapping windows.
    """
    if window < 1:
        raise ValueError(f"window: expected a positive integer, got {window}")
    records = _rollout_records(metrics_jsonl)
    keys = list(keys) if keys is not None else _reward_keys(records) + list(LEARNING_KEYS)
    out = {}
    for key in keys:
        values = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
        if values:
            head, tail = values[:window], values[-window:]
            out[key] = (sum(head) / len(head), sum(tail) / len(tail))
    return out


def plot_reward_curves(metrics_jsonl: str | os.PathLike, out_png: str | os.PathLike) -> None:
    """Three panels against `step`: mean raw rewards, answer/think lengths, and batch health (with the
    well-formed fraction). Reward and well-formed legend entries carry their first-5 -> last-5 means."""
    records = _rollout_records(metrics_jsonl)
    reward_keys = _reward_keys(records)
    summary = first_last_means(metrics_jsonl, reward_keys + list(LEARNING_KEYS))

    fig, axes = new_figure(15, 4, ncols=3)
    panels = ((axes[0], reward_keys, "raw reward (mean)"), (axes[1], _LENGTH_KEYS, "words"),
              (axes[2], _HEALTH_KEYS, "fraction of batch"))
    for ax, keys, ylabel in panels:
        series = {}
        for key in keys:
            points = [(r["step"], r[key]) for r in records if key in r]
            if points:
                name = key[len("reward/"):-len("/mean")] if key.startswith("reward/") else key
                if key in summary:
                    name += " ({:.2f} -> {:.2f})".format(*summary[key])
                series[name] = tuple(zip(*points))
        plot_series(ax, series)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        if ax.has_data():
            ax.legend(fontsize="small")
    axes[0].set_title("rewards (legend: first-5 -> last-5 step mean)", fontsize="small")
    save_figure(fig, out_png, dpi=100)
