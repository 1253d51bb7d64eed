"""WritingBench queries (`benchmark_all.jsonl`) and requirement subsets, validated on load."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from jaxwrite.common.errors import InputError
from jaxwrite.common.jsonl import read_jsonl
from jaxwrite.common.data_dir import benchmark_dir

CRITERION_KEYS = ("name", "criteria_description", "1-2", "3-4", "5-6", "7-8", "9-10")
NUM_CRITERIA = 5
LANGS = ("en", "zh")
REQUIREMENTS = ("style", "format", "length")


@dataclasses.dataclass(frozen=True)
class WritingBenchQuery:
    index: int
    domain1: str
    domain2: str
    lang: str
    query: str
    # Each criterion is the file's dict with keys in file order: the critic prompt renders it with str().
    checklist: tuple[dict[str, str], ...]


@dataclasses.dataclass(frozen=True)
class RequirementSubset:
    """One requirement (style / format / length): its query indices and, per query, the targeted criteria."""
    indices: tuple[int, ...]
    criteria: dict[int, tuple[str, ...]]


def load_writingbench(data_dir: str | os.PathLike | None = None) -> dict[int, WritingBenchQuery]:
    """All queries by index, from `<data_dir>/writingbench/benchmark_all.jsonl`."""
    path = str(benchmark_dir(data_dir, "writingbench") / "benchmark_all.jsonl")
    queries: dict[int, WritingBenchQuery] = {}
    for line, rec in read_jsonl(path, required=("index", "domain1", "domain2", "lang", "query", "checklist")):
        q = _parse_query(rec, path, line)
        if q.index in queries:
            raise InputError(f"expected each index once, {q.index} repeats", path=path, line=line,
                             field="index")
        queries[q.index] = q
    return queries


def _parse_query(rec: dict[str, Any], path: str, line: int) -> WritingBenchQuery:
    def bad(field: str, expected: str) -> InputError:
        return InputError(f"expected {expected}", path=path, line=line, field=field)

    if not isinstance(rec["index"], int) or isinstance(rec["index"], bool):
        raise bad("index", "an integer")
    for field in ("domain1", "domain2", "query"):
        if not isinstance(rec[field], str):
            raise bad(field, "a string")
    if rec["lang"] not in LANGS:
        raise bad("lang", f"one of {LANGS}, found {rec['lang']!r}")
    checklist = rec["checklist"]
    if not isinstance(checklist, list) or len(checklist) != NUM_CRITERIA:
        raise bad("checklist", f"a list of exactly {NUM_CRITERIA} criteria")
    names = set()
    for i, crit in enumerate(checklist):
        if not isinstance(crit, dict) or tuple(crit) != CRITERION_KEYS:
            raise bad(f"checklist[{i}]", f"an object with keys {list(CRITERION_KEYS)} in this order")
        if not all(isinstance(v, str) for v in crit.values()):
            raise bad(f"checklist[{i}]", "string values")
        if crit["name"] in names:
            raise bad(f"checklist[{i}].name", f"a name unique within the query, {crit['name']!r} repeats")
        names.add(crit["name"])
    return WritingBenchQuery(rec["index"], rec["domain1"], rec["domain2"], rec["lang"], rec["query"],
                             tuple(checklist))


def load_requirement_subsets(data_dir: str | os.PathLike | None = None) -> dict[str, RequirementSubset]:
    """The style / format / length subsets from `<data_dir>/writingbench/requirement_subsets.json`."""
    path = str(benchmark_dir(data_dir, "writingbench") / "requirement_subsets.json")
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON ({e.msg})", path=path, line=e.lineno) from None
    subsets = {}
    for req in REQUIREMENTS:
        entry = raw.get(req)
        try:
            indices = tuple(int(i) for i in entry["R"])
            criteria = {int(i): tuple(str(n) for n in names) for i, names in entry["C"]}
        except (TypeError, KeyError, ValueError):
            raise InputError('expected {"R": [index, ...], "C": [[index, [name, ...]], ...]}',
                             path=path, field=req) from None
        subsets[req] = RequirementSubset(indices, criteria)
    return subsets
