"""Keep the top fraction of scored records within each group (WritingBench: top 50 % per subdomain).

Arithmetic, exactly: a group of n records keeps k = R(f * n) with f read as an exact decimal
(`Fraction(str(f))`, so 0.3 * 10 is 3, not 2.9999) and R one of
  floor          (default: "the top 50 %" never keeps more than half; 7 records -> 3)
  ceil           (7 -> 4)
  round_half_up  (7 -> 4, 5 -> 3; halves go up, unlike Python's round)
Order within a group: higher score first; equal scores are broken by the record's `tiebreak` key
ascending (the pipeline uses (str(query id), sample)), so the kept set never depends on file order.

A group is "too small to filter" when n < min_records or k == 0. Such groups are listed and counted and
handled by `on_small`: "error" (the default; raise naming them), "keep" (all their records are kept) or
"drop" (none are kept); never skipped silently.
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any, Hashable, Sequence

from jaxwrite.common import InputError

ROUNDINGS = ("floor", "ceil", "round_half_up")
ON_SMALL = ("error", "keep", "drop")


@dataclasses.dataclass(frozen=True)
class Scored:
    group: str
    score: float
    tiebreak: tuple[Hashable, ...]


@dataclasses.dataclass(frozen=True)
class GroupResult:
    group: str
    records: int
    kept: int
    too_small: bool
    min_kept_score: float | None  # the lowest score that made it into the kept set


def keep_count(n: int, fraction: float, rounding: str = "floor") -> int:
    """k of n records kept for `fraction` (see the module docstring for the rounding rules)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction: expected 0 < fraction <= 1, got {fraction}")
    exact = Fraction(str(fraction)) * n
    if rounding == "floor":
        return math.floor(exact)
    if rounding == "ceil":
        return math.ceil(exact)
    if rounding == "round_half_up":
        return math.floor(exact + Fraction(1, 2))
    raise ValueError(f"rounding '{rounding}': expected one of {', '.join(ROUNDINGS)}")


def top_fraction_per_group(items: Sequence[Scored], fraction: float, *, rounding: str = "floor",
                           min_records: int = 2, on_small: str = "error") -> tuple[list[int], list[GroupResult]]:
    """(indices of kept items in input order, one result per group in name order)."""
    if on_small not in ON_SMALL:
        raise ValueError(f"on_small '{on_small}': expected one of {', '.join(ON_SMALL)}")
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(item.group, []).append(i)
    kept: list[int] = []
    results: list[GroupResult] = []
    small: list[str] = []
    for name in sorted(groups):
        members = sorted(groups[name], key=lambda i: (-items[i].score, items[i].tiebreak))
        k = keep_count(len(members), fraction, rounding)
        too_small = len(members) < min_records or k == 0
        if too_small:
            small.append(f"{name} ({len(members)} records, keeps {k})")
            k = len(members) if on_small == "keep" else 0
        chosen = members[:k]
        kept += chosen
        results.append(GroupResult(name, len(members), len(chosen), too_small,
                                   items[chosen[-1]].score if chosen else None))
    if small and on_small == "error":
        raise InputError(f"{len(small)} group(s) too small to filter (fewer than {min_records} records or "
                         f"none kept at fraction {fraction} with {rounding}): {'; '.join(small[:5])}"
                         f"{' ...' if len(small) > 5 else ''}; choose on_small keep or drop")
    return sorted(kept), results


def summarize_groups(results: Sequence[GroupResult]) -> dict[str, Any]:
    return {"groups": len(results), "records": sum(r.records for r in results),
            "kept": sum(r.kept for r in results), "too_small": [r.group for r in results if r.too_small]}
