"""A record job's input read past its bad lines: a line that is not UTF-8, not JSON, not an object, or
lacks a required field is set aside with what is wrong with it (file:line, field), so the job reports and
counts it as a skipped record (`RecordJob.pending(unreadable=...)`) while the rest run."""
from __future__ import annotations

import dataclasses
import os

from jaxwrite.common.errors import InputError
from jaxwrite.common.jsonl import scan_jsonl


@dataclasses.dataclass(frozen=True)
class InputLines:
    """A jsonl input read past its bad lines (`read_input`): `entries` holds every non-blank line in
    order, (line, record, None) for a good one and (line, {}, error) for one that is not UTF-8, not
    JSON, not an object, or lacks a required field."""
    path: str
    entries: list[tuple[int, dict, InputError | None]]

    @property
    def records(self) -> list[tuple[int, dict]]:
        """(line, record) of the good lines, in order."""
        return [(line, rec) for line, rec, err in self.entries if err is None]

    @property
    def bad(self) -> list[InputError]:
        """What is wrong with each bad line (file:line first): `RecordJob.pending(unreadable=...)`."""
        return [err for _, _, err in self.entries if err is not None]


def read_input(path: str | os.PathLike, required: tuple[str, ...] = ()) -> InputLines:
    """Reads a record job's input jsonl without stopping at a bad line: hand `.records` (or items made
    from them) and `.bad` to `RecordJob.pending`, which reports and counts the bad lines as skipped
    records while the rest run. A missing file, a folder or a gzip stream cut short still raise."""
    return InputLines(os.fspath(path), list(scan_jsonl(path, required)))
