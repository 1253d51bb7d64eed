"""Training-curve PNGs from a run's metrics.jsonl."""
from __future__ import annotations

import os
from typing import Sequence

from matplotlib.figure import Figure

from jaxwrite.common import read_jsonl


def plot_metrics(metrics_jsonl: str, keys: Sequence[str], out_png: str, title: str) -> str | None:
    """One line per key against step; returns the path, or None when no key has data."""
    if not os.path.exists(metrics_jsonl):
        return None
    records = [rec for _, rec in read_jsonl(metrics_jsonl, required=("step",))]
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    for key in keys:
        points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        if points:
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if len(points) < 15 else None, markersize=3, label=key)
    if not ax.has_data():
        return None
    ax.set_xlabel("step")
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    return out_png


def last_value(metrics_jsonl: str, key: str):
    """The last logged value of `key` (None when never logged)."""
    if not os.path.exists(metrics_jsonl):
        return None
    value = None
    for _, rec in read_jsonl(metrics_jsonl):
        if key in rec:
            value = rec[key]
    return value
