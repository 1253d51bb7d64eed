"""A job's settings beside its output (`<output>.meta.json`), and the one refusal to resume an output
with other settings: one file would then mix records made two ways (two judges, two prompts, two
answer-extraction rules) and no figure computed from it would mean anything.

The same file keeps what each run that wrote the output spent on its models (`usage_runs`, appended by
`record_usage`): a resume adds its run, so the file's cost is the sum over them."""
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
    previous = _read(path)
    if previous is not None and output_started(out_path):
        before = settings(previous)
        now = settings(meta)
        changed = [k for k in now if before.get(k) != now[k]]
        if changed:
            raise InputError(f"expected the settings of the existing output ({', '.join(changed)} differ: "
                             f"{ {k: before.get(k) for k in changed} }); use a new output path", path=path)
    meta = dict(meta)
    if previous is not None and previous.get(USAGE_RUNS) and settings(previous) == settings(meta):
        meta[USAGE_RUNS] = previous[USAGE_RUNS]   # earlier runs of the same job spent this too
    _write(path, meta)


USAGE_RUNS = "usage_runs"


def record_usage(out_path: str | os.PathLike, usage: Mapping[str, Any]) -> dict[str, Any]:
    """Appends one run's usage ({role: usage}, e.g. `{"judge": Usage.to_dict()}`) to `usage_runs` in
    `<out_path>.meta.json` (made when the job keeps no other settings there); returns the meta."""
    path = meta_path(out_path)
    meta = _read(path) or {}
    meta[USAGE_RUNS] = list(meta.get(USAGE_RUNS) or []) + [dict(usage)]
    _write(path, meta)
    return meta


def _read(path: str) -> dict[str, Any] | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write(path: str, meta: Mapping[str, Any]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
    os.replace(tmp, path)   # whole or absent: a reader never sees half a file
