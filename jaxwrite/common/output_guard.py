"""What keeps a record job's output whole in a hostile world (`RecordJob` uses these): one writer per
output (an exclusive lock), duplicate ids left by an earlier run compacted away, and a full disk told
as one line that says how much space the rest needs.

The lock is `fcntl.flock` on a hidden file beside the output (`.NAME.lock`, holding the holder's PID):
the kernel drops it when its process ends, however it ends, so a killed run never leaves a stale lock.
A run of one process holds its output's lock exclusively; each process of a multi-process run holds
its part file's lock exclusively and the output's shared (so a lone run cannot merge parts a running
split job is writing, and two split jobs with the same process count cannot share parts). A bucket
output's lock lies beside the staging folders (it guards the runs on this machine; runs on two
machines cannot see each other's locks). Locks work across processes; within one process a second job
on the same output shares the first's lock (the caller's own business).
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import sys
import threading
from typing import Any, Callable

from jaxwrite.common.errors import InputError

_HELD: dict[str, list] = {}      # lock file -> [fd, holders in this process]
_HELD_LOCK = threading.Lock()


def lock_file(path: str) -> str:
    """The lock file that guards output `path`: `.NAME.lock` beside it (hidden, so no glob of the
    output's part files matches it)."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.lock")


class OutputLock:
    """Locks held on an output (and its part) for one job; `release` drops them (idempotent)."""

    def __init__(self, held: list[str]):
        self._held = held

    def release(self) -> None:
        held, self._held = self._held, []
        for path in held:
            _release(path)


def shown_path(path: str, mirror=None) -> str:
    """A local output path as the user named it: its bucket path when `mirror` stages it."""
    if mirror is None:
        return path
    return f"{mirror.remote}/{os.path.relpath(os.path.abspath(path), mirror.local)}"


def lock_output(output: str, part: str | None = None, mirror=None) -> OutputLock:
    """Locks `output` for this job: exclusively, or, when this process writes `part` (one process of
    several), shared, with `part` exclusive. Raises InputError naming the output (as the user named it)
    and the holder's PID when another run holds it. `mirror`: the MirroredDir staging a bucket output
    (its lock then lies beside the staging folders, since each run stages into a folder of its own)."""
    if os.path.isdir(output):   # refused before a lock file is made beside it
        raise InputError("expected an output file, found a directory", path=output)
    paths = [output] + ([part] if part is not None else [])
    if mirror is not None:
        from jaxwrite.common.remote import staging_dir
        files = [staging_dir(shown_path(p, mirror)) + ".lock" for p in paths]
    else:
        files = [lock_file(p) for p in paths]
    held: list[str] = []
    try:
        for i, path in enumerate(files):
            _acquire(path, shared=part is not None and i == 0, shown=shown_path(output, mirror))
            held.append(path)
    except BaseException:
        OutputLock(held).release()
        raise
    return OutputLock(held)


def _acquire(path: str, shared: bool, shown: str) -> None:
    with _HELD_LOCK:
        if path in _HELD:
            _HELD[path][1] += 1
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                who = f"PID {holder}" if holder else "another process"
                raise InputError(f"another run ({who}) is writing this output; wait for it to end, or stop it, "
                                 f"or choose another output (one writer per output: {path})", path=shown) from None
            try:   # the file may have been released and removed between our open and our lock: retry
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[path] = [fd, 1]


def _release(path: str) -> None:
    with _HELD_LOCK:
        entry = _HELD.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HELD[path]
        fd = entry[0]
        try:   # the last holder anywhere removes the file (a shared holder checks it is the last)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.remove(path)
        except (BlockingIOError, FileNotFoundError):
            pass
        os.close(fd)


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


def compact_duplicates(path: str, id_key: str, id_form: Callable[[Any], Any], desc: str) -> int:
    """Rewrites the output `path` keeping the first record of each id, when an earlier run (two writers
    before there was a lock) wrote some twice; says so on one line; returns the records removed. Lines
    that are not records are kept as they are. Replaced atomically (written beside it, then renamed)."""
    from jaxwrite.common.jsonl import _lines
    if not os.path.isfile(path):
        return 0
    seen: set = set()
    kept: list[bytes] = []
    repeated: dict = {}
    for _, raw in _lines(path, cut_ok=True):
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        rid = rec.get(id_key) if isinstance(rec, dict) else None
        if isinstance(rid, (str, int, float)) and not isinstance(rid, bool):
            key = id_form(rid)
            if key in seen:
                repeated[key] = repeated.get(key, 0) + 1
                continue
            seen.add(key)
        kept.append(raw if raw.endswith(b"\n") else raw + b"\n")
    if not repeated:
        return 0
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.compacting")
    if path.endswith(".gz"):
        import gzip
        with gzip.open(tmp, "wb") as f:
            f.writelines(kept)
    else:
        with open(tmp, "wb") as f:
            f.writelines(kept)
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    removed = sum(repeated.values())
    first = next(iter(repeated))
    print(f"{desc}: {path}: {removed} duplicate record(s) of {len(repeated)} id(s) found (first: {first!r}) and "
          f"removed, keeping the first of each (two runs wrote to this output at once)", file=sys.stderr, flush=True)
    return removed


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full_error(shown: str, folder: str, written_bytes: int, records: int, left: int) -> InputError:
    """One line for a full disk: the output, the free space, and about how much more the `left` records
    need at the `written_bytes / records` average so far; what was written stays and resumes."""
    free = shutil.disk_usage(folder).free if os.path.isdir(folder) else 0
    each = written_bytes / records if records else 0
    need = f"about {_size(each * left)} more for the {left} record(s) left ({_size(each)} each so far)" if each \
        else f"room for the {left} record(s) left"
    return InputError(f"no space left on the device ({_size(free)} free); it needs {need}. Free space or choose "
                      f"another output, then re-run the same command: the {records} record(s) written are kept "
                      f"and the run resumes after them", path=shown)


def disk_full_line(err: OSError) -> str:
    """One line for a full disk met outside a record job's output (a checkpoint, a report, metadata)."""
    path = os.fspath(err.filename) if err.filename else None
    folder = os.path.dirname(os.path.abspath(path)) if path else "."
    free = shutil.disk_usage(folder).free if os.path.isdir(folder) else 0
    return (f"{path + ': ' if path else ''}no space left on the device ({_size(free)} free); free space or choose "
            f"another place, then re-run the same command (long jobs resume where they stopped)")


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
