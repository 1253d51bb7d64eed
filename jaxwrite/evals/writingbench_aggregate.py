"""WritingBench score files and their aggregation, exactly as the official `calculate_scores.py`.

All figures are on the 1-10 scale (the leaderboard shows them x10). S(q) is the mean of every
evaluation of query q; a criterion's value is the mean over its repeats.
- overall: micro mean over all evaluations; count: number of scored queries.
- domain1 / domain2 / lang: mean of S(q) over the scored queries of each group (lang is a jaxwrite
  extension: the official script has no per-language split).
- {req}_R: mean of S(q) over the scored queries of the requirement subset.
- {req}_C: mean of criterion values over (q, c) with q scored in the subset and c one of q's targeted
  criteria (looked up by name).
A figure with nothing to average is null.

Beside a score file `S.jsonl` the scorer keeps `S.jsonl.meta.json` (the settings: judge, prompt,
answer extraction, ...) and `S.failures.jsonl` (criteria that never got a valid verdict).
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import statistics
from typing import Any, Mapping, Sequence

from jaxwrite.common.errors import InputError
from jaxwrite.common.jsonl import read_jsonl
from jaxwrite.evals.writingbench_data import LANGS, REQUIREMENTS, RequirementSubset, WritingBenchQuery

# index -> criterion name -> the scores of its repeats
QueryScores = dict[int, dict[str, list[int]]]


def score_meta_path(scores_path: str | os.PathLike) -> pathlib.Path:
    """`<scores>.meta.json`: the settings a score file was made with."""
    path = pathlib.Path(scores_path)
    return path.with_name(path.name + ".meta.json")


def score_failures_path(scores_path: str | os.PathLike) -> pathlib.Path:
    """`<scores stem>.failures.jsonl`: the criteria that never got a valid verdict."""
    path = pathlib.Path(scores_path)
    return path.with_name(path.stem + ".failures.jsonl")


def read_score_meta(scores_path: str | os.PathLike, meta_path: str | os.PathLike | None = None
                    ) -> dict[str, Any] | None:
    """A score file's metadata (`meta_path`, default `score_meta_path`); None when the default is absent
    (score files made elsewhere); a named file that is missing or not a JSON object is an error."""
    path = pathlib.Path(meta_path) if meta_path else score_meta_path(scores_path)
    if not path.exists():
        if meta_path:
            raise InputError("expected a score file's .meta.json", path=str(path))
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"expected JSON ({err.msg})", path=str(path), line=err.lineno) from None
    if not isinstance(meta, dict):
        raise InputError("expected a JSON object", path=str(path))
    return meta


def read_score_file(path: str | os.PathLike, queries: Mapping[int, WritingBenchQuery]) -> QueryScores:
    """Reads an official-format score file, failing on the first bad line with file:line."""
    path = os.fspath(path)
    scores: QueryScores = {}
    for line, rec in read_jsonl(path, required=("index", "scores")):
        def bad(field: str, expected: str, line: int = line) -> InputError:
            return InputError(f"expected {expected}", path=path, line=line, field=field)

        index = rec["index"]
        if not isinstance(index, int) or isinstance(index, bool) or index not in queries:
            raise bad("index", f"a WritingBench index (1..{len(queries)}), found {index!r}")
        if index in scores:
            raise bad("index", f"each index once, {index} repeats")
        if not isinstance(rec["scores"], dict) or not rec["scores"]:
            raise bad("scores", "a non-empty object {criterion name: [{score, reason}, ...]}")
        names = {c["name"] for c in queries[index].checklist}
        per_criterion: dict[str, list[int]] = {}
        for name, verdicts in rec["scores"].items():
            if name not in names:
                raise bad(f"scores.{name}", f"a criterion of query {index}")
            if not isinstance(verdicts, list) or not verdicts:
                raise bad(f"scores.{name}", "a non-empty list of {score, reason}")
            per_criterion[name] = [_valid_score(v, bad, f"scores.{name}") for v in verdicts]
        scores[index] = per_criterion
    return scores


def _valid_score(verdict: Any, bad, field: str) -> int:
    score = verdict.get("score") if isinstance(verdict, dict) else None
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 10:
        raise bad(field, f"a score between 1 and 10, found {score!r}")
    return score


def aggregate_writingbench(scores: QueryScores, queries: Mapping[int, WritingBenchQuery],
                           subsets: Mapping[str, RequirementSubset]) -> dict[str, Any]:
    """The official aggregates plus the labelled `lang` extension (keys as in the CLI contract)."""
    all_scores = [s for crit in scores.values() for reps in crit.values() for s in reps]
    per_query = {i: statistics.fmean(s for reps in crit.values() for s in reps)
                 for i, crit in scores.items()}
    result: dict[str, Any] = {
        "overall": statistics.fmean(all_scores) if all_scores else None,
        "count": len(scores),
        "domain1": _group_means(per_query, lambda i: queries[i].domain1),
        "domain2": _group_means(per_query, lambda i: queries[i].domain2),
        "lang": {lang: _mean_or_none([v for i, v in per_query.items() if queries[i].lang == lang])
                 for lang in LANGS},
    }
    for req in REQUIREMENTS:
        subset = subsets[req]
        scored = [i for i in subset.indices if i in scores]
        result[f"{req}_R"] = _mean_or_none([per_query[i] for i in scored])
        result[f"{req}_C"] = _mean_or_none([
            statistics.fmean(scores[i][name])
            for i in scored for name in subset.criteria.get(i, ()) if name in scores[i]])
    return result


def _group_means(per_query: Mapping[int, float], key) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for i, value in per_query.items():
        groups.setdefault(key(i), []).append(value)
    return {name: statistics.fmean(vals) for name, vals in sorted(groups.items())}


def _mean_or_none(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize_seeds(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean and sample std (0 for one run) of every figure across judge seeds, same nesting as one result."""
    def combine(values: list):
        if any(isinstance(v, Mapping) for v in values):
            maps = [v or {} for v in values]
            return {k: combine([m.get(k) for m in maps]) for k in sorted(set().union(*maps))}
        numbers = [v for v in values if v is not None]
        if not numbers:
            return None
        std = statistics.stdev(numbers) if len(numbers) > 1 else 0.0
        return {"mean": statistics.fmean(numbers), "std": std, "n": len(numbers)}

    if not results:
        raise ValueError("no results to summarise")
    return {k: combine([r[k] for r in results]) for k in results[0] if k != "count"} | {
        "count": [r["count"] for r in results]}


def leaderboard_scale(value: float | None) -> float | None:
    """The public leaderboard shows the 1-10 figures x10."""
    return None if value is None or math.isnan(value) else 10.0 * value
