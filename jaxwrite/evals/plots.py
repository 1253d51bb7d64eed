"""PNG figures for evaluation reports (matplotlib, headless Agg backend)."""
from __future__ import annotations

import os
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # reports are written on servers and TPU hosts without a display
import matplotlib.pyplot as plt  # noqa: E402


def bar_chart(values: Mapping[str, float], path: str | os.PathLike, title: str, value_label: str,
              value_range: tuple[float, float] | None = None) -> str:
    """Horizontal bars, one per name, labelled with their value; returns the path written."""
    names = list(values)
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(names) + 1.2))
    bars = ax.barh(names, [values[n] for n in names], color="#4C72B0")
    ax.bar_label(bars, fmt="%.1f", padding=2)
    ax.invert_yaxis()  # first name on top, as in a table
    ax.set_xlabel(value_label)
    ax.set_title(title)
    if value_range is not None:
        ax.set_xlim(*value_range)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return os.fspath(path)


def length_plot(required: Sequence[float], produced: Sequence[float], path: str | os.PathLike,
                title: str) -> str:
    """Produced vs required length on log-log axes with the y = x line (LongWrite-Ruler style)."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    # Zero-length outputs cannot sit on a log axis; they are drawn at 1 word and called out in the legend.
    zeros = sum(1 for p in produced if p <= 0)
    ax.scatter(required, [max(p, 1) for p in produced], s=18, alpha=0.7,
               label="outputs" + (f" ({zeros} empty, drawn at 1)" if zeros else ""))
    lo = 1 if zeros else min(min(required), min(produced))
    hi = max(max(required), max(produced))
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", label="produced = required")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("required length (words / CJK characters)")
    ax.set_ylabel("produced length")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return os.fspath(path)
