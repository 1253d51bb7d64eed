"""Every PNG jaxwrite writes is drawn here, with one convention: a bare `matplotlib.figure.Figure`
rendered by Agg at save time. Nothing touches pyplot's global backend or figure list, so importing
jaxwrite never changes a notebook's inline plotting, and figures are freed when they go out of scope.

Callers pass plain data (names, numbers, series); the benchmark-specific layout stays with them.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from matplotlib.figure import Figure

Series = Mapping[str, tuple[Sequence[float], Sequence[float]]]   # {label: (xs, ys)}
_BLUE, _GREY = "#4C72B0", "#999999"


def new_figure(width: float, height: float, ncols: int = 1):
    """(figure, axes): one axes, or a list of `ncols` side by side."""
    fig = Figure(figsize=(width, height))
    return fig, fig.subplots(1, ncols)


def save_figure(fig: Figure, path: str | os.PathLike, dpi: int = 120) -> str:
    """Tight layout, parent folders made, PNG written; returns the path."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    return path


def plot_series(ax, series: Series) -> None:
    """One line per label on `ax`, markers only while points are few enough to read."""
    for label, (xs, ys) in series.items():
        if len(xs):
            ax.plot(xs, ys, label=label, marker="o" if len(xs) < 15 else None, markersize=3)


def line_chart(series: Series, path: str | os.PathLike, title: str, xlabel: str = "step",
               ylabel: str = "", size: tuple[float, float] = (6, 3.6), ylim=None, xticks=None,
               dpi: int = 100) -> str | None:
    """Lines against a shared x axis; returns the path, or None when no series has a point."""
    fig, ax = new_figure(*size)
    plot_series(ax, series)
    if not ax.has_data():
        return None
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if xticks is not None:
        ax.set_xticks(list(xticks))
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return save_figure(fig, path, dpi)


def bar_chart(values: Mapping[str, float], path: str | os.PathLike, title: str, value_label: str,
              value_range: tuple[float, float] | None = None) -> str:
    """Horizontal bars, one per name, labelled with their value; returns the path written."""
    names = list(values)
    fig, ax = new_figure(7, 0.4 * len(names) + 1.2)
    bars = ax.barh(names, [values[n] for n in names], color=_BLUE)
    ax.bar_label(bars, fmt="%.1f", padding=2)
    ax.invert_yaxis()  # first name on top, as in a table
    ax.set_xlabel(value_label)
    ax.set_title(title)
    if value_range is not None:
        ax.set_xlim(*value_range)
    return save_figure(fig, path)


def interval_chart(values: Mapping[str, float], intervals: Mapping[str, tuple[float, float]],
                   path: str | os.PathLike, title: str, value_label: str, reference: float | None = None) -> str:
    """One point per name with its [low, high] interval, the highest value on top."""
    order = sorted(values, key=lambda n: values[n])
    centre = [values[n] for n in order]
    below = [max(c - intervals[n][0], 0.0) for c, n in zip(centre, order)]
    above = [max(intervals[n][1] - c, 0.0) for c, n in zip(centre, order)]
    fig, ax = new_figure(7, 0.45 * len(order) + 1.5)
    ax.errorbar(centre, range(len(order)), xerr=[below, above], fmt="o", capsize=4)
    ax.set_yticks(range(len(order)), order)
    if reference is not None:
        ax.axvline(reference, color="grey", lw=0.8, ls="--")
    ax.set_xlabel(value_label)
    ax.set_title(title)
    return save_figure(fig, path)


def histogram_chart(groups: Mapping[str, Sequence[float]], bins: Sequence[float], path: str | os.PathLike,
                    title: str, xlabel: str, ylabel: str) -> str:
    """Overlaid histograms, the first group drawn grey behind the others; labels carry counts."""
    fig, ax = new_figure(6.5, 4)
    for i, (label, values) in enumerate(groups.items()):
        ax.hist(values, bins=list(bins), alpha=0.5 if i == 0 else 0.8, label=f"{label} ({len(values)})",
                color=_GREY if i == 0 else _BLUE)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    return save_figure(fig, path)


def length_plot(required: Sequence[float], produced: Sequence[float], path: str | os.PathLike,
                title: str) -> str:
    """Produced vs required length on log-log axes with the y = x line (LongWrite-Ruler style)."""
    fig, ax = new_figure(5.5, 5)
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
    return save_figure(fig, path)


def binned_rate_chart(centres: Sequence[float], rates: Sequence[float], counts: Sequence[int],
                      path: str | os.PathLike, title: str, xlabel: str, ylabel: str,
                      curve: tuple[Sequence[float], Sequence[float]] | None = None, curve_label: str = "") -> str:
    """A rate per bin (points sized by how many items it holds, each labelled with that count) against a
    0.5 reference line, with an optional fitted curve (xs, ys) drawn through them."""
    fig, ax = new_figure(6.5, 4)
    if curve is not None:
        ax.plot(curve[0], curve[1], color=_GREY, label=curve_label)
    size = [20 + 180 * n / max(max(counts), 1) for n in counts]
    ax.scatter(centres, rates, s=size, color=_BLUE, zorder=3, label="verdicts in the bin")
    for x, y, n in zip(centres, rates, counts):
        ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize="small")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small", loc="upper left")
    ax.grid(alpha=0.3)
    return save_figure(fig, path)
