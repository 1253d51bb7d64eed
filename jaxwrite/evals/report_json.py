"""Strict JSON for summaries: a NaN or an infinity, which most JSON readers reject, is written as null and
its path listed under "non_finite_as_null"."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping


def finite_json(value: Any, where: str = "", found: list[str] | None = None) -> tuple[Any, list[str]]:
    """`value` with every NaN or infinity replaced by None, and the dotted paths where that happened."""
    found = [] if found is None else found
    if isinstance(value, float) and not math.isfinite(value):
        found.append(where or "(top)")
        return None, found
    if isinstance(value, Mapping):
        return {k: finite_json(v, f"{where}.{k}" if where else str(k), found)[0] for k, v in value.items()}, found
    if isinstance(value, (list, tuple)):
        return [finite_json(v, f"{where}[{i}]", found)[0] for i, v in enumerate(value)], found
    return value, found


def write_json(path: str | os.PathLike, value: Any, indent: int | None = 1) -> list[str]:
    """Writes strict JSON: a NaN or an infinity (no JSON reader has to accept them) is written as null,
    and for a top-level object its paths are listed under "non_finite_as_null". Returns those paths."""
    clean, found = finite_json(value)
    if found and isinstance(clean, dict):
        clean["non_finite_as_null"] = found
    with open(path, "w", encoding="utf-8") as f:
        json.dump(clean, f, ensure_ascii=False, indent=indent, allow_nan=False)
        f.write("\n")
    return found
