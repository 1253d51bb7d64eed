"""Runs LongBench-Write on a response file: S_l always, S_q when a judge is given, S = (S_l + S_q) / 2.

Writes into `out_dir`: lengths.jsonl (per item), quality.jsonl (judge verdicts, appended as they
come; a re-run skips done items), quality_failures.jsonl (items whose verdict never parsed, or whose
judge call failed: dropped from S_q and counted), length_plot.png, summary.json, report.md and
report.html. Items without a response are left out of every score and counted as missing.

The judge must sample its verdict (mode "generate"): the official verdict is six 1-5 scores in JSON,
which the non-official score_logit mode (one 1-10 score) cannot give, so such a judge is refused up
front. A permanent judge error (a 4xx, a prompt too long for the judge's context) is not re-asked.

Only the answer is counted and judged (answer extraction, `jaxwrite.evals.responses`; default
"auto"): a think/answer model's <answer> block, else the text after the first "</think>\n\n". A
malformed think/answer response is left out of S_l and S_q like a missing one, and counted with its
problems under `answer_extraction` in summary.json and in the report.

`out_dir` may be a bucket folder (gs://...): it is written in a local staging folder, pulled first (so
judged items resume) and pushed as verdicts come and at the end (`jaxwrite.common.remote.StagedOutput`).
"""
from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
from typing import Any

from jaxwrite.chat import Asked, ChatModel, ChatRequest, ask_until_valid, describe_model, metered, request_seed
from jaxwrite.common.errors import InputError
from jaxwrite.common.record_job import ProcessShard, RecordJob
from jaxwrite.common.remote import StagedOutput
from jaxwrite.evals.judges import UNPARSEABLE_VERDICT, require_generating_judge
from jaxwrite.evals.longbench_write import (JUDGE_ATTEMPTS, JUDGE_SAMPLING, QUALITY_DIMENSIONS, QUALITY_VERDICT,
                                            LongWriteItem, length_score, length_scores_by_bin, load_longbench_write,
                                            parse_quality_output, quality_request, quality_scores,
                                            read_longwrite_answers)
from jaxwrite.common.plots import length_plot
from jaxwrite.evals.judging import answer_extraction_markdown, judge_block, unresolved_failures
from jaxwrite.evals.report import Section, markdown_table, write_report
from jaxwrite.evals.responses import answer_extraction_mode
from jaxwrite.prompts import LONGBENCH_WRITE_JUDGE, official_prompt_version
from jaxwrite.text import count_words


def score_longbench_write(responses_path: str | os.PathLike, out_dir: str | os.PathLike,
                          data_dir: str | os.PathLike | None = None, *, subset: str = "longbench_write",
                          judge: ChatModel | None = None, answer_extraction: str = "auto", seed: int = 0,
                          batch_size: int = 16, progress: bool = True,
                          shard: ProcessShard | None = None) -> dict[str, Any]:
    """Scores one response file and writes the report; returns the summary (also in summary.json).

    shard: this process's share when several judge one output (every count-th item into its own part,
    merged by the lead); only the lead writes the report files, every process returns the summary.

    answer_extraction: "auto" (default), "think_answer", "official_strip" or "none".
    """
    if judge is not None:
        require_generating_judge(judge, QUALITY_VERDICT)
        judge = metered(judge)   # its calls' tokens, time and cost go to the judging block
    with StagedOutput(out_dir, folder=True, tag=shard.tag if shard else "") as staged:
        return _score(responses_path, pathlib.Path(staged.path), data_dir=data_dir, subset=subset, judge=judge,
                      answer_extraction=answer_extraction, seed=seed,
                      batch_size=batch_size, progress=progress, shard=shard, mirror=staged.mirror)


def _score(responses_path, out: pathlib.Path, *, data_dir, subset: str, judge: ChatModel | None,
           answer_extraction: str, seed: int, batch_size: int, progress: bool, shard: ProcessShard | None,
           mirror) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    items = load_longbench_write(data_dir, subset)
    extracted = read_longwrite_answers(responses_path, len(items),
                                       answer_extraction_mode(answer_extraction))
    answers = extracted.scorable()
    answered = [it for it in items if it.index in answers]
    malformed = extracted.malformed()
    if malformed:
        print(f"warning: {len(malformed)} responses are malformed think/answer outputs and are not scored; "
              "see answer_extraction in summary.json", file=sys.stderr)

    rows = [{"index": it.index, "type": it.type, "required": it.length,
             "produced": count_words(answers[it.index])} for it in answered]
    for row in rows:
        row["S_l"] = length_score(row["required"], row["produced"])
    lead = shard is None or shard.is_lead
    if lead:
        with open(out / "lengths.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    s_l = statistics.fmean(r["S_l"] for r in rows) if rows else None

    summary: dict[str, Any] = {
        "benchmark": subset, "items": len(items), "answered": len(answered),
        "malformed": len(malformed), "missing": len(items) - len(answered) - len(malformed),
        "strip_think": extracted.applied != "none", "answer_extraction": extracted.summary(),
        "S_l": s_l, "S_l_by_length": length_scores_by_bin([r["required"] for r in rows],
                                                          [r["S_l"] for r in rows]),
        "judge": judge.label if judge is not None else None, "S_q": None, "S": None}
    if judge is not None:
        start = judge.usage.copy()
        verdicts, dropped = _judge_quality(answered, answers, judge, out, seed, batch_size, progress,
                                           extracted.applied, shard, mirror)
        quality = quality_scores(verdicts)
        summary |= {"quality": quality, "quality_items": len(verdicts), "quality_dropped": sum(dropped.values()),
                    "quality_dropped_by_kind": dropped,
                    "S_q": quality["S_q"] if quality else None,
                    "usage": {"judge": judge.usage_dict(judge.usage.since(start)) | {"scope": "this run"}}}
        if s_l is not None and summary["S_q"] is not None:
            summary["S"] = (s_l + summary["S_q"]) / 2.0
    if lead:
        _write(out, summary, rows, judge)
    return summary


def _judge_quality(answered: list[LongWriteItem], answers: dict[int, str], judge: ChatModel,
                   out: pathlib.Path, seed: int, batch_size: int, progress: bool, extraction: str,
                   shard: ProcessShard | None = None, mirror=None):
    """Verdicts for every answered item (resuming from quality.jsonl) and the items dropped this run,
    {failure kind: count} (`RecordJob.failed_by_kind`)."""
    path, failures = out / "quality.jsonl", out / "quality_failures.jsonl"
    job = RecordJob(path, "index", desc="longbench-write quality", unit="item", failures=failures,
                    progress=progress, shard=shard, mirror=mirror)
    _check_extraction(job, extraction)
    todo = job.pending(answered, id_of=lambda it: it.index)

    def ask(item: LongWriteItem, attempt: int) -> ChatRequest:
        return quality_request(item.prompt, answers[item.index], request_seed(seed, item.index, attempt))

    def check(text: str, _item: LongWriteItem) -> tuple[dict | None, str | None]:
        scores = parse_quality_output(text)
        return (scores, None) if scores is not None else (None, UNPARSEABLE_VERDICT)

    def write(asked: Asked) -> None:
        job.write({"index": asked.item.index, "scores": asked.value, "judge": judge.label,
                   "answer_extraction": extraction})

    for chunk in job.batches(todo, batch_size):
        asked = ask_until_valid(judge, chunk, ask, check, attempts=JUDGE_ATTEMPTS, on_valid=write)
        for a in sorted((a for a in asked if not a.accepted), key=lambda a: a.item.index):
            job.fail({"index": a.item.index, **a.failure()}, error=a.error, kind=a.kind)
        job.note(dropped=job.failed)
    job.close()
    answered_ids = {it.index for it in answered}
    verdicts = [rec["scores"] for _, rec in job.records() if rec["index"] in answered_ids]
    return verdicts, job.failed_by_kind


def _check_extraction(job: RecordJob, extraction: str) -> None:
    """Refuses to resume verdicts judged on other text: records written before answer extraction
    existed judged the text after the official '</think>\\n\\n' cut (then the default)."""
    for line, rec in job.records():
        if rec.get("answer_extraction", "official_strip") != extraction:
            raise InputError(f"expected verdicts judged under answer extraction '{extraction}', found "
                             f"'{rec.get('answer_extraction', 'official_strip')}'; use a new --output",
                             path=job.path, line=line, field="answer_extraction")


def _dropped_text(by_kind: dict[str, int]) -> str:
    """The items dropped this run, by why: a permanent error was asked once, the rest up to the limit."""
    said = {"permanent": "by a permanent judge error, asked once (a re-run fails the same way)",
            "transient": "by a transient judge error (timeout, 5xx; a re-run retries them)",
            "unparseable": f"with no parseable verdict in {JUDGE_ATTEMPTS} tries (a re-run samples again and "
                           "may or may not get one)"}
    parts = [f"{n} {said[kind]}" for kind, n in by_kind.items() if n]
    return f"dropped this run: {sum(by_kind.values())}" + (f" ({'; '.join(parts)})" if parts else "")


def _write(out: pathlib.Path, summary: dict[str, Any], rows: list[dict[str, Any]],
           judge: ChatModel | None = None) -> None:
    """Writes the report files; adds the `judging` block to `summary` itself, so the summary returned
    is the one summary.json holds. Failed items: the answered ones whose verdict never came (their
    latest reason in quality_failures.jsonl) and the malformed responses."""
    failures = {} if judge is None else unresolved_failures(
        out / "quality_failures.jsonl", out / "quality.jsonl", "index", ids={r["index"] for r in rows})
    summary.update(judge_block(
        describe_model(judge, JUDGE_SAMPLING, JUDGE_ATTEMPTS) if judge is not None else None,
        official_prompt_version(LONGBENCH_WRITE_JUDGE) if judge is not None else None,
        summary["answer_extraction"], failures, no_judge="no judge: S_q not computed, so S is not either",
        usage=summary.pop("usage", None)))
    figures = []
    if rows:
        figures.append(length_plot([r["required"] for r in rows], [r["produced"] for r in rows],
                                   out / "length_plot.png", f"{summary['benchmark']}: produced vs required"))
    headline = markdown_table(["S_l", "S_q", "S", "answered", "malformed (not scored)", "missing"],
                              [[summary["S_l"], summary["S_q"], summary["S"], summary["answered"],
                                summary["malformed"], summary["missing"]]])
    sections = [Section("Scores", headline + "\n\nLength score S_l by required length:\n\n" +
                        markdown_table(["required length", "S_l"], list(summary["S_l_by_length"].items())),
                        tuple(figures))]
    if summary.get("quality"):
        q = summary["quality"]
        sections.append(Section(
            "Quality (judge)",
            f"Judge: {summary['judge']} (the paper used GPT-4o-2024-05-13; another judge gives a different "
            f"metric). Items judged: {summary['quality_items']}; "
            f"{_dropped_text(summary['quality_dropped_by_kind'])}.\n\n"
            + markdown_table(["dimension", "score (0-100)"], [[d, q[d]] for d in QUALITY_DIMENSIONS])))
    sections.append(Section("Answer extraction", answer_extraction_markdown(summary["answer_extraction"])))
    write_report(out, f"LongBench-Write ({summary['benchmark']})", summary, sections)
