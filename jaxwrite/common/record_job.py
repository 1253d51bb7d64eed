"""The one loop of every long job: skip what is done, write each record as it finishes, set failures
and bad records aside, show progress; so resume, duplicate ids, cut last lines, compressed outputs and
bad records are handled in one place.

Its concerns each live in a module of their own: reading the input past its bad lines (record_input),
failures told apart by kind (record_failures), the progress bar (record_progress), the split across
processes and the merge of their parts (record_parts), bucket outputs (remote.StagedOutput)."""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar

from jaxwrite.common.errors import InputError
from jaxwrite.common.jsonl import append_jsonl, read_done_ids, read_jsonl, repair_torn_tail
from jaxwrite.common.output_guard import compact_duplicates, disk_full_error, is_disk_full, lock_output, shown_path
from jaxwrite.common.record_failures import FAILURE_KINDS, FailureTally
from jaxwrite.common.record_parts import (ProcessShard, append_failure_parts, merge_parts, part_files,
                                          part_path)
from jaxwrite.common.record_progress import ProgressBar

if TYPE_CHECKING:
    from jaxwrite.common.remote import MirroredDir

__all__ = ["FAILURE_KINDS", "ProcessShard", "RecordJob", "merge_parts", "part_path"]

T = TypeVar("T")
R = TypeVar("R")


class RecordJob:
    """An append-only jsonl output holding one record per id, written as records finish, resumed by id.

        job = RecordJob(out_path, "index", desc="scoring", unit="query", failures=failures_path)
        todo = job.pending(items, id_of=lambda item: item.index)
        for chunk in job.batches(todo, 8):   # or one record at a time: `for item, x in job.each(todo, fn)`
            ... job.write(record) | job.fail(failure lines) | job.skip(item, error)
        left = job.close()                   # records failed or skipped this run: exit non-zero if any

    Resume: opening the job mends what a kill may have left at the end of the output (and of the
    failures file): a last line that lacks only its newline is a whole record and is kept; a partial
    one is dropped and its record written again. `pending` then leaves out every id already written.

    Duplicate ids in the input are refused up front with one InputError naming the file, the line and
    the id, rather than de-duplicated: resuming by id cannot tell two records with one id apart, so the
    second would be skipped as done, or its output would land beside the first's under one id.

    Outputs named `*.gz` are written compressed (one gzip member per record) and resumed compressed.

    Bad records: an input line that cannot be read as a record (`record_input.read_input`, then
    `pending(unreadable=...)`), a record whose preparation raises InputError in `each`, or one that the
    caller hands to `skip`, is reported on one line (file:line, field, what was wrong), added to the
    failures file when the job has one (`{id_key: id, "line": line, "error": text}`; the id is null for
    a line that could not be read), and counted; the other records run on. `fail` counts a record that
    was tried and not done and writes its failure lines; a failure given its `error` is told apart at
    `close` by its `kind` (`record_failures`). Neither is in the output, so a re-run tries them again.

    Several processes (`shard`): each takes every count-th input item and writes its own part file
    beside the output; the lead merges them at `close` (`record_parts`). Bucket outputs (`mirror`): the
    job pushes its own files every `push_every` records or `push_seconds` seconds and at `close`
    (`jaxwrite.common.remote.StagedOutput`).
    """

    def __init__(self, out_path: str | os.PathLike, id_key: str, *, desc: str, unit: str = "record",
                 failures: str | os.PathLike | None = None, progress: bool = True,
                 id_form: Callable[[Any], Any] | None = None, shard: ProcessShard | None = None,
                 mirror: MirroredDir | None = None, push_every: int = 50, push_seconds: float = 60.0):
        """id_form maps an id to the form compared on resume (e.g. `str`, where 1 and "1" name one record);
        mirror: the `MirroredDir` whose local folder holds the output and failures file (a bucket output)."""
        self.output, self.id_key, self.desc, self.unit = os.fspath(out_path), id_key, desc, unit
        from jaxwrite.common.remote import is_remote
        for path in (out_path, failures):
            if path is not None and is_remote(path):   # appending needs a file system, not an object store
                # Callers that take bucket outputs stage them first (common.remote.StagedOutput).
                raise InputError("expected a local output: this command appends each result as it finishes "
                                 "and does not stage bucket outputs (generate and the eval commands do); "
                                 "write locally and copy the finished file (gcloud storage cp)",
                                 path=os.fspath(path))
        self.failures_output = os.fspath(failures) if failures is not None else None
        self.shard = shard or ProcessShard()
        self.mirror, self.push_every, self.push_seconds = mirror, push_every, push_seconds
        self._unpushed, self._pushed_at = 0, time.monotonic()
        self.progress = progress and self.shard.is_lead
        self._form = id_form or (lambda i: i)
        # One writer per output (common/output_guard.py), before anything reads or mends it.
        self._lock = lock_output(self.output, part_path(self.output, self.shard.index, self.shard.count)
                                 if self.shard.count > 1 else None, mirror)
        for path in (self.output, self.failures_output):
            if path is not None and os.path.isdir(path):
                raise InputError("expected an output file, found a directory", path=path)
            if path is not None:
                repair_torn_tail(path)
        if self.shard.count == 1:   # alone: finish what a run of several processes left in parts first
            self._merge()
            self.path, self.failures = self.output, self.failures_output
        else:
            self.path = part_path(self.output, self.shard.index, self.shard.count)
            self.failures = (part_path(self.failures_output, self.shard.index, self.shard.count)
                             if self.failures_output is not None else None)
            for path in (self.path, self.failures):
                if path is not None:
                    repair_torn_tail(path)
        for path in {self.output, self.path} if self.shard.is_lead else {self.path}:
            compact_duplicates(path, id_key, self._form, desc)   # what two writers left before the lock
        self.done = {self._form(i) for path in [self.output, *part_files(self.output)]
                     for i in read_done_ids(path, id_key)}
        self.resumed = self.written = self.failed = self.skipped = 0
        self._errors = FailureTally()   # failures given an error, by kind
        self._bar, self._total = ProgressBar(desc, unit, self.progress), 0
        # Where `pending`'s items came from, to name a bad one in `skip`.
        self._source: str | None = None
        self._id_of: Callable[[Any], Any] | None = None
        self._line_of: Callable[[Any], int] | None = None

    # ---------------------------------------------------------------- input

    def records(self) -> Iterator[tuple[int, dict]]:
        """(line, record) of what the output holds already (mended; with several processes, every
        part too), e.g. to check it was made with the same settings before resuming it."""
        paths = [p for p in [self.output, *part_files(self.output)] if os.path.exists(p)]
        return (item for p in paths for item in read_jsonl(p))

    def pending(self, items: Sequence[T], id_of: Callable[[T], Any] = lambda item: item, *,
                source: str | os.PathLike | None = None,
                line_of: Callable[[T], int] | None = None, unreadable: Iterable[InputError] = ()) -> list[T]:
        """The items whose id is not in the output yet, in order; the progress bar will count all of them.

        Ids must be strings or numbers and unique (compared in `id_form`: a repeat is refused here,
        before anything runs); `source` and `line_of` name where an item came from, for the errors
        about it. `unreadable`: the input's lines that are not records (`read_input(...).bad`), each
        reported and counted as a skipped record (by the first process only: each reads the whole input)."""
        self._source = os.fspath(source) if source is not None else None
        self._id_of, self._line_of = id_of, line_of
        ids, first = [], {}
        for item in items:
            rid, line = self._locate(item)
            if isinstance(rid, bool) or not isinstance(rid, (str, int, float)):
                raise InputError(f"expected a string or a number as the id, found {type(rid).__name__}",
                                 path=self._source, line=line, field=self.id_key)
            key = self._form(rid)
            if key in first:
                seen = f" (first on line {first[key]})" if first[key] is not None else ""
                raise InputError(f"expected unique ids, {rid!r} repeats{seen}", path=self._source, line=line,
                                 field=self.id_key)
            first[key] = line
            ids.append(rid)
        for err in unreadable if self.shard.is_lead else ():
            self._report(None, err.line, err)
        # This process's items: every count-th one by input position (the same split on every re-run).
        mine = self.shard.share(list(zip(items, ids)))
        todo = [item for item, rid in mine if self._form(rid) not in self.done]
        self.resumed += len(mine) - len(todo)
        self._total = len(mine)
        return todo

    @property
    def total(self) -> int:
        """Items `pending` was given that are this process's (all of them for a single process)."""
        return self._total

    def _locate(self, item: Any) -> tuple[Any, int | None]:
        """(id, input line) of an item of `pending`."""
        return (self._id_of(item) if self._id_of else None), (self._line_of(item) if self._line_of else None)

    def is_done(self, rid: Any) -> bool:
        return self._form(rid) in self.done

    def batches(self, todo: Sequence[T], size: int) -> Iterator[Sequence[T]]:
        """`todo` in consecutive chunks of `size` (the last may be shorter), for batched engines/judges;
        shows the progress bar from the start of the loop."""
        self.open_progress()
        for start in range(0, len(todo), size):
            yield todo[start:start + size]

    def each(self, items: Iterable[T], prepare: Callable[[T], R]) -> Iterator[tuple[T, R]]:
        """(item, prepare(item)) for every item whose preparation succeeds; an InputError from
        `prepare` skips that item (`skip`) and the rest go on. Shows the progress bar from the start."""
        self.open_progress()
        for item in items:
            try:
                yield item, prepare(item)
            except InputError as err:
                self.skip(item, err)

    # ---------------------------------------------------------------- output

    def write(self, record: dict, *, advance: int = 1) -> None:
        """Appends one finished record (flushed to disk) and marks its id done."""
        try:
            append_jsonl(self.path, record)
        except OSError as err:
            if not is_disk_full(err):
                raise
            raise self._disk_full() from None
        self.done.add(self._form(record[self.id_key]))
        self.written += 1
        self.advance(advance)
        self._maybe_push()

    def _disk_full(self) -> InputError:
        """The one-line error for a full disk (a cut last line is mended on the re-run, as after a kill)."""
        self._bar.close()
        files = [p for p in [self.output, *part_files(self.output)] if os.path.isfile(p)]
        left = self._total - self.resumed - self.written - self.failed - self.skipped
        return disk_full_error(shown_path(self.output, self.mirror), os.path.dirname(os.path.abspath(self.path)),
                               sum(os.path.getsize(p) for p in files), len(self.done), max(left, 1))

    def fail(self, lines: dict | Iterable[dict] = (), *, advance: int = 1, error: str | None = None,
             kind: str = "transient") -> None:
        """Counts one record tried and not done, writing its failure line(s) to the failures file;
        `error` (why, e.g. the server's message) and its `kind` (one of FAILURE_KINDS; a chat
        result's `failure_kind`) go to the summary `close` prints."""
        if kind not in FAILURE_KINDS:
            raise ValueError(f"kind: expected one of {FAILURE_KINDS}, got {kind!r}")
        for line in [lines] if isinstance(lines, dict) else lines:
            append_jsonl(self._failures(), line)
        self.failed += 1
        if error is not None:
            self._errors.add(error, kind)
        self.advance(advance)
        self._maybe_push()

    @property
    def failed_by_kind(self) -> dict[str, int]:
        """{kind: failures given an error of that kind this run}, for every kind of FAILURE_KINDS."""
        return self._errors.by_kind

    def failure_summary(self) -> list[str]:
        """One line per kind of failure given an error: its count, its first message, what to do."""
        return self._errors.summary(self.unit, f"; see {self.failures}" if self.failures else "")

    def skip(self, item: Any, error: Exception | str, *, advance: int = 1) -> str:
        """Reports a bad record on one line (its file:line first) and counts it; returns that line."""
        rid, line = self._locate(item)
        text = self._report(rid, line, error)
        self.advance(advance)
        self._maybe_push()
        return text

    def _report(self, rid: Any, line: int | None, error: Exception | str) -> str:
        """Prints a bad record's line, adds it to the failures file and counts it as skipped."""
        text = str(error)
        where = self._source if line is None else f"{self._source}:{line}" if self._source else f"line {line}"
        if where and not text.startswith(where):
            text = f"{where}: {text}"
        if self.failures is not None:
            append_jsonl(self.failures, {self.id_key: rid, "line": line, "error": text})
        print(f"{self.desc}: error: {text}", file=sys.stderr, flush=True)
        self.skipped += 1
        return text

    def _failures(self) -> str:
        if self.failures is None:
            raise ValueError(f"{self.desc}: this job has no failures file")
        return self.failures

    # ---------------------------------------------------------------- bucket outputs

    def push(self) -> None:
        """Uploads this process's files (its output or part, its failures) to the bucket, if any changed."""
        if self.mirror is not None:
            self.mirror.push(only=[self.path, self.failures])
        self._unpushed, self._pushed_at = 0, time.monotonic()

    def _maybe_push(self) -> None:
        self._unpushed += 1
        if self.mirror is not None and (self._unpushed >= self.push_every
                                        or time.monotonic() - self._pushed_at >= self.push_seconds):
            self.push()

    def _parts(self) -> list[str]:
        """Part files beside the output and the failures file, as this machine has them."""
        return part_files(self.output) + (part_files(self.failures_output) if self.failures_output else [])

    def _merge(self) -> None:
        """Merges the parts into the output (and failures); for a bucket output, pushes the two merged
        files, then deletes the parts there (a kill in between leaves parts the next merge skips)."""
        parts = self._parts()
        merge_parts(self.output, self.id_key, self._form)
        if self.failures_output is not None:
            append_failure_parts(self.failures_output)
        if self.mirror is not None and parts:
            self.mirror.push(only=[self.output, self.failures_output])
            for part in parts:
                self.mirror.delete(part)

    # ---------------------------------------------------------------- progress

    def open_progress(self, total: int | None = None, initial: int | None = None) -> None:
        """Shows the progress bar, once: by default over `pending`'s items with the resumed ones done.
        `batches`, `each` and the first update open it; a job with its own count opens it first."""
        self._bar.open(self._total if total is None else total, self.resumed if initial is None else initial)

    def advance(self, n: int = 1) -> None:
        if n:
            self.open_progress()
            self._bar.update(n)

    def note(self, **counts: Any) -> None:
        """Counts shown after the bar (failed=..., dropped=...)."""
        self.open_progress()
        self._bar.note(counts)

    def close(self) -> int:
        """Closes the bar and reports the bad records skipped; returns the records failed or skipped
        this run (not in the output: a re-run tries them again), so a caller can exit non-zero."""
        self._bar.close()
        for line in self.failure_summary():
            print(f"{self.desc}: {line}", file=sys.stderr, flush=True)
        if self.skipped:
            see = f"; see {self.failures}" if self.failures else ""
            print(f"{self.desc}: {self.skipped} bad record(s) skipped{see} (re-run retries them)",
                  file=sys.stderr, flush=True)
        self.push()
        if self.shard.count > 1:
            if self.shard.barrier is not None:
                self.shard.barrier()    # every process has written (and pushed) its part
            if self.shard.is_lead:
                if self.mirror is not None:   # the others' parts as they finished them
                    for part in self._parts():
                        if part not in (self.path, self.failures):
                            self.mirror.forget(part)
                    self.mirror.pull()
                self._merge()
            if self.shard.barrier is not None:
                self.shard.barrier()    # the output is whole before any process reads it
            if self.mirror is not None and not self.shard.is_lead:   # read the merged output from now on
                for path in [self.output, self.failures_output, *self._parts()]:
                    if path is not None:
                        self.mirror.forget(path)
                self.mirror.pull()
        self._lock.release()
        return self.failed + self.skipped
