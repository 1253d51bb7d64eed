"""Input files of the preparation steps, validated line by line.

Queries: jsonl `{id, query, domain1?, domain2?, lang?}`; prompts: jsonl `{id, prompt}`. A record
without `id` takes its `index` (WritingBench's files as shipped, whose `checklist` the steps read as
criteria). Ids are
strings or integers, unique in a file (a repeat is an error naming both lines, because resuming by
id would otherwise merge two records). An empty or whitespace-only query is not an error of the
file but cannot be labelled: it is skipped, counted and reported with its first line, never dropped
silently.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from jaxwrite.common import InputError, read_jsonl


@dataclasses.dataclass(frozen=True)
class QueryRecord:
    """One writing query; `extra` carries the other fields of its line unchanged (domains, lang, ...)."""
    id: str | int
    text: str
    line: int
    extra: dict[str, Any]


@dataclasses.dataclass
class LoadedQueries:
    records: list[QueryRecord]
    empty_lines: list[int]  # lines whose text is empty: skipped and counted

    def warn_empty(self, path: str, field: str) -> None:
        if self.empty_lines:
            print(f"warning: {path}:{self.empty_lines[0]} field '{field}': {len(self.empty_lines)} "
                  f"record(s) with an empty {field} are skipped (counted as empty_{field})", file=sys.stderr)


def load_queries(path: str | os.PathLike, text_field: str = "query") -> LoadedQueries:
    """Records with a unique `id` (else `index`) and a string `text_field`; empty texts are set aside,
    not dropped."""
    path = os.fspath(path)
    records, empty, seen = [], [], {}
    for line, rec in read_jsonl(path, required=(text_field,)):
        if "id" not in rec and "index" not in rec:
            raise InputError("missing required field (or 'index', as WritingBench's files name it)", path=path,
                             line=line, field="id")
        rid, text = rec.get("id", rec.get("index")), rec[text_field]
        if isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid == "":
            raise InputError(f"expected a non-empty string or an integer, found {rid!r}", path=path, line=line,
                             field="id")
        key = str(rid)
        if key in seen:
            raise InputError(f"expected unique ids, {rid!r} repeats (first on line {seen[key]})", path=path,
                             line=line, field="id")
        seen[key] = line
        if not isinstance(text, str):
            raise InputError(f"expected a string, found {type(text).__name__}", path=path, line=line,
                             field=text_field)
        if not text.strip():
            empty.append(line)
            continue
        extra = {k: v for k, v in rec.items() if k not in ("id", text_field)}
        records.append(QueryRecord(rid, text, line, extra))
    return LoadedQueries(records, empty)
