"""How a command's failure reaches the user: one line, never a traceback, for what the user can mend
(bad input, a recipe that raises, an output or workdir where a file stands, a full disk); the whole
traceback with `--debug` or JAXWRITE_DEBUG=1.

Output places are checked before a command starts: a `--workdir` or `--output-dir` that is a file, and
any output path (those, `--output`, `--json`, `convert DST`) under a file (`FILE/sub`), are refused in
one line. A folder `--output` that is a file is told when the command first makes it (the
FileExistsError line; `convert` says so itself).
"""
from __future__ import annotations

import os
import sys
import traceback

from jaxwrite.common.errors import InputError
from jaxwrite.common.output_guard import disk_full_line, is_disk_full

DEBUG_ENV = "JAXWRITE_DEBUG"
FOLDERS = {"workdir": "--workdir", "output_dir": "--output-dir"}        # always folders
OUTPUTS = {**FOLDERS, "output": "--output", "json": "--json", "dst": "DST"}   # checked for a file above them


def debug_wanted(argv: list[str]) -> tuple[bool, list[str]]:
    """(whether --debug or JAXWRITE_DEBUG=1 asks for tracebacks, argv without --debug)."""
    debug = "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    return debug, [a for a in argv if a != "--debug"]


def check_output_places(args) -> None:
    """Refuses, before anything runs, an output place a command could never write: a folder flag that
    names a file, or any output path with a file among its parents."""
    for dest, flag in OUTPUTS.items():
        value = getattr(args, dest, None)
        if not isinstance(value, str) or "://" in value:
            continue
        blocker = _file_above(value)
        if blocker is not None:
            raise InputError(f"{flag}: expected a path in a folder, but {blocker} is a file", path=value)
        if dest in FOLDERS and os.path.exists(value) and not os.path.isdir(value):
            raise InputError(f"{flag}: expected a folder, found a file", path=value)


def _file_above(path: str) -> str | None:
    """The nearest existing parent of `path` that is not a folder, else None."""
    parent = os.path.dirname(os.path.abspath(path))
    while True:
        if os.path.exists(parent):
            return None if os.path.isdir(parent) else parent
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up


def one_line(err: BaseException) -> str | None:
    """The line that tells the user about `err`, or None when it is not theirs to mend (a bug: the
    traceback stays)."""
    if isinstance(err, InputError):
        return str(err)
    if is_disk_full(err):
        return disk_full_line(err)
    if isinstance(err, (NotADirectoryError, FileExistsError, IsADirectoryError)) and err.filename:
        path = os.fspath(err.filename)
        if isinstance(err, IsADirectoryError):
            return f"{path}: expected a file, found a folder"
        if os.path.isfile(path):
            return f"{path}: expected a folder, found a file"
        blocker = _file_above(path)
        if blocker is not None:
            return f"{path}: expected a path in a folder, but {blocker} is a file"
    return None


def report(command: str, err: BaseException, debug: bool) -> int | None:
    """Prints `err` as one line (with its traceback first under debug) and returns the exit status 2, or
    None when it is no user error (the caller re-raises it)."""
    line = one_line(err)
    if line is None:
        return None
    if debug:
        traceback.print_exception(err, file=sys.stderr)
    print(f"jaxwrite {command}: error: {line}", file=sys.stderr)
    return 2
