"""A job's settings beside its output (`<output>.meta.json`), and the one refusal to resume an output
with other settings: one file would then mix records made two ways (two judges, two prompts, two
answer-extraction rules) and no figure computed from it would mean anything."""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Callable, Mapping, Sequence

from jaxwrite.common.errors import InputError


def meta_path(out_path: str | os.PathLike) -> str:
    """`<output>.meta.json`: the settings an output was made with."""
    return os.fspath(out_path) + ".meta.json"


def output_started(out_path: str | os.PathLike) -> bool:
    """Whether the output holds records already: the file itself, or the part files several processes
    write beside it (common.record_parts.part_path)."""
    out = os.fspath(out_path)
    return os.path.exists(out) or bool(glob.glob(glob.escape(out.removesuffix(".gz")) + ".part-*"))


def write_or_check_meta(out_path: str | os.PathLike, meta: Mapping[str, Any],
                        compared: Sequence[str] | Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Writes `meta` to `<out_path>.meta.json`, after refusing (InputError naming the meta file) to go on
    with an output already started under other settings.

    compared: the keys whose values must match, or a function giving {setting: value} of a meta dict
    (one that reads older meta files too, naming their settings as the current ones do).
    """
    path = meta_path(out_path)
    settings = compared if callable(compared) else (lambda m: {k: m.get(k) for k in compared})
    if os.path.exists(path) and output_started(out_path):
        with open(path, encoding="utf-8") as f:
            before = settings(json.load(f))
        now = settings(meta)
        changed = [k for k in now if before.get(k) != now[k]]
        if changed:
            raise InputError(f"expected the settings of the existing output ({', '.join(changed)} differ: "
                             f"{ {k: before.get(k) for k in changed} }); use a new output path", path=path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
