"""jsonl reading with file:line errors, and append-only incremental writing for resumable jobs."""
from __future__ import annotations

import gzip
import json
import os
from typing import Any, Iterator

from jaxwrite.common.errors import InputError


def _open(path: str | os.PathLike):
    path = os.fspath(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_jsonl(path: str | os.PathLike, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict]]:
    """Yields (line_number, record) for each non-blank line; raises InputError on bad lines."""
    if not os.path.exists(path):
        raise InputError("file not found", path=os.fspath(path))
    with _open(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"invalid JSON ({e.msg} at column {e.colno})",
                                 path=os.fspath(path), line=lineno) from None
            if not isinstance(rec, dict):
                raise InputError(f"expected a JSON object, found {type(rec).__name__}",
                                 path=os.fspath(path), line=lineno)
            for key in required:
                if key not in rec:
                    raise InputError("missing required field", path=os.fspath(path),
                                     line=lineno, field=key)
            yield lineno, rec


def read_done_ids(path: str | os.PathLike, key: str) -> set[Any]:
    """Ids already present in an incremental output file (a torn last line is ignored)."""
    done: set[Any] = set()
    if not os.path.exists(path):
        return done
    with _open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill mid-write; it is rewritten on resume
            if isinstance(rec, dict) and key in rec:
                done.add(rec[key])
    return done


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Appends one record and flushes it to disk, so a killed job loses at most this line."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    _repair_torn_tail(path)
    try:
        line = json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (model text such as JSON's "\udcce" escape, parsed) has no UTF-8 form;
        # ASCII escapes keep the record exact and the line valid JSON.
        line = json.dumps(record).encode("ascii")
    with open(path, "ab") as f:
        f.write(line + b"\n")
        f.flush()
        os.fsync(f.fileno())


def write_jsonl(path: str | os.PathLike, records) -> int:
    """Writes a whole file of records at once (replacing it; parent folders made); returns the count.
    Written beside the target and renamed, so a killed run never leaves a half-written file. For
    outputs built in one go; jobs that must survive a kill mid-way append with `append_jsonl`."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp, count = path + ".partial", 0
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def _repair_torn_tail(path: str) -> None:
    """Drops a final line without a newline (left by a kill mid-write) before appending."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        data = f.seek(0) or f.read()
        cut = data.rfind(b"\n") + 1
        f.seek(cut)
        f.truncate()
