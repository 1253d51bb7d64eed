"""Training-curve PNGs from a run's metrics.jsonl."""
from __future__ import annotations

import os
from typing import Sequence

from jaxwrite.common import read_jsonl
from jaxwrite.common.plots import line_chart


def plot_metrics(metrics_jsonl: str, keys: Sequence[str], out_png: str, title: str) -> str | None:
    """One line per key against step; returns the path, or None when no key has data."""
    if not os.path.exists(metrics_jsonl):
        return None
    records = [rec for _, rec in read_jsonl(metrics_jsonl, required=("step",))]
    series = {}
    for key in keys:
        points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        if points:
            series[key] = tuple(zip(*points))
    return line_chart(series, out_png, title)


def last_value(metrics_jsonl: str, key: str):
    """The last logged value of `key` (None when never logged)."""
    if not os.path.exists(metrics_jsonl):
        return None
    value = None
    for _, rec in read_jsonl(metrics_jsonl):
        if key in rec:
            value = rec[key]
    return value
