"""jsonl reading with file:line errors, and append-only incremental writing for resumable jobs.

Paths ending in `.gz` are read and written gzip-compressed: a whole-file write is one gzip member, an
append adds one member per record (a file of several members is still one valid gzip stream).
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from typing import Any, Iterator

from jaxwrite.common.errors import InputError

_CHUNK = 1 << 20


def _compressed(path: str) -> bool:
    return path.endswith(".gz")


class _CutShort(EOFError):
    """A gzip stream that ends mid-member: what a kill during an append leaves."""


def _gzip_data(path: str) -> Iterator[bytes]:
    """Decompressed chunks of a (multi-member) gzip file; raises _CutShort after the last whole data
    when the file ends mid-member, and InputError when it holds data that is not gzip."""
    member, started = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), False   # 16+: gzip framing
    with open(path, "rb") as f:
        while raw := f.read(_CHUNK):
            while raw:
                started = True
                try:
                    yield member.decompress(raw)
                except zlib.error as e:
                    raise InputError(f"expected gzip data, as the name ends in .gz ({e})", path=path) from None
                raw = b""
                if member.eof:
                    raw = member.unused_data
                    member, started = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), False
    if started:
        raise _CutShort


def _lines(path: str, *, cut_ok: bool = False) -> Iterator[tuple[int, bytes]]:
    """(line_number, raw line) of a plain or gzip file. A gzip file that ends mid-member (a kill) ends
    its lines there when `cut_ok`, else raises InputError."""
    if not _compressed(path):
        with open(path, "rb") as f:
            yield from enumerate(f, start=1)
        return
    lineno, rest = 0, b""
    try:
        for chunk in _gzip_data(path):
            *whole, rest = (rest + chunk).split(b"\n")
            for line in whole:
                lineno += 1
                yield lineno, line + b"\n"
    except _CutShort:
        if not cut_ok:
            raise InputError("compressed data ends mid-record (cut short)", path=path, line=lineno + 1) from None
    if rest:
        yield lineno + 1, rest


def read_jsonl(path: str | os.PathLike, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict]]:
    """Yields (line_number, record) for each non-blank line; raises InputError on bad lines."""
    for lineno, rec, err in scan_jsonl(path, required):
        if err is not None:
            raise err
        yield lineno, rec


def scan_jsonl(path: str | os.PathLike, required: tuple[str, ...] = ()
               ) -> Iterator[tuple[int, dict, InputError | None]]:
    """Like read_jsonl, but reads past bad lines: yields (line, record, None) for each good line and
    (line, {}, error) for each bad one, so a caller can skip and count them. A missing file, a
    folder or a gzip stream cut short still raise."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError("file not found", path=path)
    if os.path.isdir(path):
        raise InputError("expected a file, found a directory", path=path)
    for lineno, raw in _lines(path):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield lineno, {}, InputError(f"expected UTF-8 text, found byte 0x{raw[e.start]:02x} at column "
                                         f"{e.start + 1}", path=path, line=lineno)
            continue
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            yield lineno, {}, InputError(f"invalid JSON ({e.msg} at column {e.colno})", path=path, line=lineno)
            continue
        if not isinstance(rec, dict):
            yield lineno, {}, InputError(f"expected a JSON object, found {type(rec).__name__}", path=path,
                                         line=lineno)
            continue
        missing = [key for key in required if key not in rec]
        if missing:
            yield lineno, {}, InputError("missing required field", path=path, line=lineno, field=missing[0])
            continue
        yield lineno, rec, None


def read_done_ids(path: str | os.PathLike, key: str) -> set[Any]:
    """Ids already present in an incremental output file. Lines that do not parse (a line, or a gzip
    member, cut by a kill mid-write) are passed over: their records are written again on resume."""
    path = os.fspath(path)
    done: set[Any] = set()
    if not os.path.isfile(path):
        return done
    for _, raw in _lines(path, cut_ok=True):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get(key), (str, int, float)):
            done.add(rec[key])
    return done


# Characters json.dumps leaves raw (ensure_ascii=False) that some readers take for a line break:
# Python's str.splitlines, JavaScript, many editors. Escaped, one record is one line for every reader.
# They can only occur inside JSON strings, so a plain replacement keeps the JSON equal.
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_LINE_BREAKS_TABLE = str.maketrans(_LINE_BREAKS)


def json_line(record: Any) -> str:
    """One JSON text on one line, non-ASCII kept as is but for the Unicode line separators (escaped)."""
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKS_TABLE)


def _encode(record: dict) -> bytes:
    try:
        return json_line(record).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (model text such as JSON's "\udcce" escape, parsed) has no UTF-8 form;
        # ASCII escapes keep the record exact and the line valid JSON.
        return json.dumps(record).encode("ascii")


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Appends one record and flushes it to disk, so a killed job loses at most this line.

    A plain file's tail is mended first (`repair_torn_tail`). A `.gz` file gets one gzip member per
    record; checking its tail means reading it whole, so that is done once, when a job opens it
    (`RecordJob` does)."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    line = _encode(record) + b"\n"
    if _compressed(path):
        line = gzip.compress(line, mtime=0)
    else:
        repair_torn_tail(path)
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def write_jsonl(path: str | os.PathLike, records) -> int:
    """Writes a whole file of records at once (replacing it; parent folders made); returns the count.
    Written beside the target and renamed, so a killed run never leaves a half-written file. For
    outputs built in one go; jobs that must survive a kill mid-way append with `append_jsonl`."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp, count = path + ".partial", 0
    with (gzip.open if _compressed(path) else open)(tmp, "wb") as f:
        for record in records:
            f.write(_encode(record) + b"\n")
            count += 1
    os.replace(tmp, path)
    return count


def repair_torn_tail(path: str | os.PathLike) -> None:
    """Mends the end of an append-only output that a kill may have cut, before appending to it.

    A last line that lacks only its newline (the kill fell between a record and its newline) is a
    whole record: it is kept and given its newline. A last line that is not a whole JSON object is
    dropped; its record is written again on resume. A `.gz` file cut mid-member is mended the same way
    (rewritten compressed beside itself, then renamed); one holding data that is not gzip is refused."""
    path = os.fspath(path)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    if _compressed(path):
        _repair_gzip_tail(path)
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        data = f.seek(0) or f.read()
        cut = data.rfind(b"\n") + 1
        if _is_record(data[cut:]):
            f.write(b"\n")
        else:
            f.truncate(cut)


def _is_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:   # JSONDecodeError, or UnicodeDecodeError for a character cut in half
        return False


def _repair_gzip_tail(path: str) -> None:
    size, tail, cut_short = 0, b"", False   # tail: the text after the last newline
    try:
        for chunk in _gzip_data(path):
            size += len(chunk)
            newline = chunk.rfind(b"\n")
            tail = tail + chunk if newline < 0 else chunk[newline + 1:]
    except _CutShort:   # everything decompressed before the cut member is kept
        cut_short = True
    if not cut_short and not tail:
        return
    keep = size - len(tail)
    with gzip.open(path + ".partial", "wb") as dst:
        try:
            for chunk in _gzip_data(path):
                dst.write(chunk[:keep])
                keep -= min(keep, len(chunk))
        except _CutShort:
            pass
        if _is_record(tail):
            dst.write(tail + b"\n")
    os.replace(path + ".partial", path)
