"""A record job split across processes: each process's share of the items and the part file it writes
beside the output, and the merge of the parts into the output (`RecordJob` uses these).

Each process takes every count-th input item (by its position in the whole input, so the split does not
depend on what is done) and writes its own part file beside the output (`part_path`); ids written by any
part, or already in the output, count as done, so a re-run, with the same count or another, never writes
a record twice. At `RecordJob.close` every process waits at the barrier and the lead merges the parts
into the output (a kill during the merge is mended by the next run, which finishes it first when it runs
as a single process). With a bucket output each process pushes its part, the lead pulls the others',
merges, pushes the output and deletes the parts in the bucket, and the others pull the merged output."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Any, Callable, Sequence, TypeVar

from jaxwrite.common.jsonl import _lines, append_jsonl, read_done_ids, read_jsonl, repair_torn_tail

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ProcessShard:
    """This process's share of a job run by `count` processes (jaxwrite.parallel.process_shard makes one
    from jax.distributed, the way `train` splits its batches). `barrier` returns once every process has
    called it (None: a single process)."""
    index: int = 0
    count: int = 1
    barrier: Callable[[], None] | None = None

    @property
    def is_lead(self) -> bool:
        return self.index == 0

    @property
    def tag(self) -> str:
        """Names this process's own local files (its staging folder): "" for a single process."""
        return f"process-{self.index:05d}-of-{self.count:05d}" if self.count > 1 else ""

    def share(self, items: Sequence[T]) -> list[T]:
        """This process's items: every count-th one by position (`RecordJob.pending` splits its input so)."""
        return list(items[self.index::self.count])


def part_path(path: str, index: int, count: int) -> str:
    """The file process `index` of `count` writes for the output `path` (`.gz` stays last)."""
    tag = f".part-{index:05d}-of-{count:05d}"
    return path[:-3] + tag + ".gz" if path.endswith(".gz") else path + tag


def part_files(path: str) -> list[str]:
    """Part files of any process count left beside `path`, in name order."""
    pattern = glob.escape(path[:-3]) + ".part-*-of-*.gz" if path.endswith(".gz") else glob.escape(path) + ".part-*-of-*"
    return sorted(glob.glob(pattern))


def merge_parts(path: str, id_key: str, id_form: Callable[[Any], Any] = lambda i: i) -> int:
    """Appends the records of every part file beside `path` whose id `path` lacks yet, then deletes the
    parts; returns the records moved. Safe to repeat after a kill mid-way: what was moved is skipped."""
    moved = 0
    done = {id_form(i) for i in read_done_ids(path, id_key)}
    for part in part_files(path):
        repair_torn_tail(part)
        for _, rec in read_jsonl(part):
            key = id_form(rec.get(id_key))
            if key not in done:
                append_jsonl(path, rec)
                done.add(key)
                moved += 1
        os.remove(part)
    return moved


def append_failure_parts(path: str) -> None:
    """Moves the lines of every failures part beside `path` into it (no ids to match: a plain append)."""
    for part in part_files(path):
        repair_torn_tail(part)
        for _, raw in _lines(part):
            if raw.strip():
                append_jsonl(path, json.loads(raw))
        os.remove(part)
