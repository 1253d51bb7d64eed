"""The critic-filtered writer SFT set: join criteria, responses and critic scores, keep the top
fraction per subdomain, write `all.jsonl` (every scored response: the "all" baseline), `kept.jsonl`
and a report (summary.json, report.md, report.html with score histograms before/after).

Both jsonl files hold `{query, response}` plus provenance (id, sample, response_id, domains, lang,
score), so either is a `data.train_path` of the "sft" objective as it is. The files are rebuilt from
the inputs on every run, so the step is idempotent. Responses without a critic score (failed or not
yet scored) are counted as unscored and reported; they are never filtered in or out silently.
"""
from __future__ import annotations

import os
import pathlib
from typing import Any


from jaxwrite.common import InputError, read_jsonl, write_jsonl  # noqa: E402
from jaxwrite.evals.report import Section, markdown_table, write_report  # noqa: E402
from jaxwrite.prep.critic_scores import read_responses  # noqa: E402
from jaxwrite.prep.criteria import read_criteria  # noqa: E402
from jaxwrite.prep.top_fraction import Scored, summarize_groups, top_fraction_per_group  # noqa: E402

_PROVENANCE = ("domain1", "domain2", "lang")


def read_scores(path: str | os.PathLike, known: set[str]) -> dict[str, float]:
    """{response_id: score} with file:line errors for unknown or repeated ids and out-of-range scores."""
    path = os.fspath(path)
    scores: dict[str, float] = {}
    for line, rec in read_jsonl(path, required=("response_id", "score")):
        rid, score = rec["response_id"], rec["score"]
        if rid not in known:
            raise InputError(f"expected a response id of the responses file, found {rid!r}", path=path,
                             line=line, field="response_id")
        if rid in scores:
            raise InputError(f"expected each response scored once, {rid!r} repeats", path=path, line=line,
                             field="response_id")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 1 <= score <= 10:
            raise InputError(f"expected a number in 1..10, found {score!r}", path=path, line=line, field="score")
        scores[rid] = float(score)
    return scores


def score_histograms(all_scores: list[float], kept_scores: list[float], path: pathlib.Path) -> str:
    """Overlaid histograms of the mean critic score, before and after filtering (bins of 0.5)."""
    from jaxwrite.common.plots import histogram_chart
    return histogram_chart({"all": all_scores, "kept": kept_scores}, [1 + 0.5 * i for i in range(19)], path,
                           "Critic scores before and after filtering", "mean critic score (1-10)", "responses")


def build_filtered_sft(criteria_path: str | os.PathLike, responses_path: str | os.PathLike,
                       scores_path: str | os.PathLike, out_dir: str | os.PathLike, *, fraction: float = 0.5,
                       rounding: str = "floor", min_records: int = 2, on_small: str = "error",
                       group_field: str = "domain2") -> dict[str, Any]:
    """Writes all.jsonl, kept.jsonl and report/ into `out_dir`; returns the summary."""
    criteria_path = os.fspath(criteria_path)
    criteria = {}
    for line, rec in read_criteria(criteria_path):
        if not isinstance(rec.get(group_field), str) or not rec[group_field]:
            raise InputError("expected a non-empty string to group by (the subdomain)", path=criteria_path,
                             line=line, field=group_field)
        criteria[str(rec["id"])] = rec
    responses = [rec for _, rec in read_responses(responses_path, criteria)]
    scores = read_scores(scores_path, {r["response_id"] for r in responses})
    scored = [r for r in responses if r["response_id"] in scores]
    records = []
    for r in scored:
        query = criteria[str(r["id"])]
        records.append({"id": r["id"], "sample": r["sample"], "response_id": r["response_id"],
                        **{k: query[k] for k in _PROVENANCE if k in query},
                        "query": query["query"], "response": r["response"], "score": scores[r["response_id"]]})
    items = [Scored(criteria[str(r["id"])][group_field], rec["score"], (str(r["id"]), r["sample"]))
             for r, rec in zip(scored, records)]
    kept_idx, groups = top_fraction_per_group(items, fraction, rounding=rounding, min_records=min_records,
                                              on_small=on_small)
    kept = [records[i] for i in kept_idx]
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "all.jsonl", records)
    write_jsonl(out / "kept.jsonl", kept)
    unscored = len(responses) - len(scored)
    summary = {"step": "filter", "fraction": fraction, "rounding": rounding, "min_records": min_records,
               "on_small": on_small, "group_field": group_field, "responses": len(responses),
               "unscored": unscored, "empty_responses": sum(not r["response"].strip() for r in scored),
               "truncated_responses": sum(r.get("finish_reason") == "length" for r in scored),
               **summarize_groups(groups),
               "per_group": {g.group: {"records": g.records, "kept": g.kept, "too_small": g.too_small,
                                       "min_kept_score": g.min_kept_score} for g in groups},
               "mean_score_all": _mean([r["score"] for r in records]),
               "mean_score_kept": _mean([r["score"] for r in kept]),
               "files": {"all": str(out / "all.jsonl"), "kept": str(out / "kept.jsonl")}}
    _report(summary, [r["score"] for r in records], [r["score"] for r in kept], out / "report")
    return summary


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _report(summary: dict[str, Any], all_scores: list[float], kept_scores: list[float], out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    figure = score_histograms(all_scores, kept_scores, out / "critic_scores.png")
    counts = markdown_table(
        ["responses", "scored", "unscored", "kept", "groups", "too small", "mean score all", "mean score kept"],
        [[summary["responses"], summary["records"], summary["unscored"], summary["kept"], summary["groups"],
          len(summary["too_small"]), summary["mean_score_all"], summary["mean_score_kept"]]])
    rule = (f"Top {summary['fraction']:g} of the scored responses per {summary['group_field']}, "
            f"k = {summary['rounding']}(fraction x n); ties broken by (query id, sample) ascending. "
            f"Groups with fewer than {summary['min_records']} records or k = 0 are too small: "
            f"{summary['on_small']}. Unscored responses (critic failures or not yet scored) are not in "
            f"either set.")
    per_group = markdown_table(["group", "records", "kept", "lowest kept score", "too small"],
                               [[g, v["records"], v["kept"], v["min_kept_score"], "yes" if v["too_small"] else ""]
                                for g, v in summary["per_group"].items()])
    write_report(out, "Critic-filtered writer SFT data", summary, [
        Section("Counts", rule + "\n\n" + counts),
        Section("Score histograms", "Mean critic score per response (WritingBench S(q) over its five criteria).",
                (figure,)),
        Section("Per group", per_group)])
