"""Critic-vs-teacher agreement on 1..10 scores: Spearman ρ (ties get average ranks), exact and
within-±1 agreement, and the fraction of verdicts that parsed. An unparsed verdict (None) counts
against `parseable` and is left out of the other figures (never given a default score). A figure with
nothing to measure is NaN here; report files write it as null (`jaxwrite.evals.report.write_json`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their positions."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson correlation of average ranks; nan when either side is constant or n < 2."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} vs {len(b)} values")
    if len(a) < 2:
        return float("nan")
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = np.sqrt((ra ** 2).sum() * (rb ** 2).sum())
    return float((ra * rb).sum() / denom) if denom > 0 else float("nan")


def score_agreement(critic: Sequence[int | None], teacher: Sequence[int]) -> dict:
    """{n, parseable, spearman, exact, within1} of critic scores against the teacher's."""
    if len(critic) != len(teacher):
        raise ValueError(f"{len(critic)} critic scores vs {len(teacher)} teacher scores")
    pairs = [(c, t) for c, t in zip(critic, teacher) if c is not None]
    out = {"n": len(teacher), "parseable": len(pairs) / len(teacher) if teacher else float("nan")}
    if not pairs:
        return {**out, "spearman": float("nan"), "exact": float("nan"), "within1": float("nan")}
    c, t = np.array(pairs, dtype=np.float64).T
    return {**out, "spearman": spearman(c, t), "exact": float(np.mean(c == t)),
            "within1": float(np.mean(np.abs(c - t) <= 1))}
