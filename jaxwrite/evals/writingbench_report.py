"""WritingBench report: headline table, domain bars on the leaderboard's x10 scale, requirement subsets,
and who judged (the `judging` block, from the live judge or from the score file's metadata)."""
from __future__ import annotations

import html
import os
import pathlib
from typing import Any, Callable, Mapping

from jaxwrite.common.plots import bar_chart
from jaxwrite.common.remote import StagedOutput
from jaxwrite.evals.judging import (answer_extraction_markdown, judge_block, judge_from_label, recorded_usage,
                                   unresolved_failures)
from jaxwrite.evals.report import Section, markdown_table, write_report
from jaxwrite.evals.writingbench_aggregate import leaderboard_scale, score_failures_path
from jaxwrite.evals.writingbench_data import REQUIREMENTS
from jaxwrite.prompts import CRITIC_SYSTEM, CRITIC_USER, official_prompt_version


def critic_prompt_version() -> str:
    """The prompt version every WritingBench verdict is asked with (the official critic templates)."""
    return official_prompt_version(CRITIC_SYSTEM, CRITIC_USER)


def writingbench_judging(meta: Mapping[str, Any] | None, scores_path: str | os.PathLike) -> dict[str, Any]:
    """The `judging` block of a score file, from its metadata (`score_writingbench` writes it) and the
    failures file beside it. Metadata written before judges described themselves gives what the judge
    label tells; a score file without metadata says the judge is not recorded. The usage is the sum
    over every run that wrote the file."""
    meta = meta or {}
    judge = meta.get("judge_info") or (judge_from_label(meta["judge"]) if meta.get("judge") else None)
    failures = unresolved_failures(score_failures_path(scores_path), scores_path, "index")
    return judge_block(judge, meta.get("prompt") or critic_prompt_version(), meta.get("answer_extraction"),
                       failures, no_judge="not recorded: the score file has no .meta.json",
                       usage=recorded_usage(meta))["judging"]


def writingbench_samples(out: pathlib.Path, *, data_dir: str | os.PathLike | None, score_files: Mapping[str, str],
                         responses: str | None, answer_extraction: str = "auto") -> str:
    """Writes `out/samples.html`: every scored query with its response (answer and plan apart) and each
    criterion's score and reason in every score file (`score_files`: {label: path}, seeds or judges), the
    queries they disagree on most first (`jaxwrite.evals.samples_page`). Without a response file the
    responses are left out and the page says so."""
    from jaxwrite.evals.responses import extract_answers, read_response_records
    from jaxwrite.evals.samples_page import read_verdicts, write_samples_page, writingbench_items
    from jaxwrite.evals.writingbench_data import load_writingbench

    queries = load_writingbench(data_dir)
    verdicts = {label: read_verdicts(path) for label, path in score_files.items() if os.path.exists(path)}
    answers, raw, said = {}, {}, "the response file"
    if responses and os.path.exists(responses):
        records = read_response_records(responses, valid=queries, expected=f"a WritingBench index (1..{len(queries)})")
        answers = extract_answers(records, answer_extraction).answers
        raw = {i: rec.get("raw_response", rec["response"]) for i, rec in records.items()}
        said = f"<code>{html.escape(responses)}</code>"
    else:
        said = "no response file (pass --responses to show them)"
    files = "".join(f"<li>{html.escape(label)}: <code>{html.escape(path)}</code></li>"
                    for label, path in score_files.items())
    intro = (f"<p>Scores from:</p><ul>{files}</ul><p>Responses: {said}. Queries where the files disagree most "
             "come first (the widest spread of one criterion's score, then of the query mean).</p>")
    items = writingbench_items(queries, verdicts, answers, raw)
    return write_samples_page(out / "samples.html", "WritingBench: every query, response and verdict", intro, items)


def writingbench_report(aggregate: Mapping[str, Any], out_dir: str | os.PathLike, judge_note: str = "",
                        extraction: Mapping[str, Any] | None = None,
                        judging: Mapping[str, Any] | None = None,
                        samples: Callable[[pathlib.Path], str] | None = None) -> dict[str, pathlib.Path | str]:
    """Writes summary.json (the aggregate itself, 1-10 scale), report.md and report.html.

    extraction: the score file's `answer_extraction` metadata; when given it is added to summary.json
    and the report shows its counts and the malformed responses, which the aggregate leaves out.
    judging: the `judging` block (`writingbench_judging`, or `judge_block` for a live judge); without
    one the report says the judge is not recorded. `samples(folder)` writes the per-sample page there
    (`writingbench_samples`), which the report links. A bucket folder (gs://...) is written through a local
    staging folder; the paths returned are then the bucket's.
    """
    with StagedOutput(out_dir, folder=True, pull=False) as staged:   # written only: nothing there is read
        paths = _report(aggregate, pathlib.Path(staged.path), judge_note, extraction, judging, samples)
    return paths if staged.mirror is None else {k: staged.shown(v) for k, v in paths.items()}


def _report(aggregate: Mapping[str, Any], out: pathlib.Path, judge_note: str, extraction: Mapping[str, Any] | None,
            judging: Mapping[str, Any] | None,
            samples: Callable[[pathlib.Path], str] | None) -> dict[str, pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    x10 = leaderboard_scale
    domain_png = bar_chart({d: x10(v) for d, v in aggregate["domain1"].items()}, out / "writingbench_domains.png",
                           "WritingBench by domain", "score (leaderboard scale, x10)", (0, 100))
    headline = markdown_table(
        ["overall (x10)", "overall (1-10)", "queries", "en (x10)", "zh (x10)"],
        [[x10(aggregate["overall"]), aggregate["overall"], aggregate["count"],
          x10(aggregate["lang"]["en"]), x10(aggregate["lang"]["zh"])]])
    requirements = markdown_table(
        ["requirement", "R (x10)", "C (x10)"],
        [[req, x10(aggregate[f"{req}_R"]), x10(aggregate[f"{req}_C"])] for req in REQUIREMENTS])
    subdomains = markdown_table(["subdomain", "score (x10)"],
                                [[d, x10(v)] for d, v in aggregate["domain2"].items()])
    note = ("Aggregated as the official calculate_scores.py; the per-language split is a jaxwrite "
            "extension. " + judge_note).strip()
    sections = [Section("Overall", note + "\n\n" + headline),
                Section("Domains", markdown_table(["domain", "score (x10)"],
                                                  [[d, x10(v)] for d, v in aggregate["domain1"].items()]),
                        (domain_png,)),
                Section("Requirement subsets", "R: mean query score over the subset; C: mean score of the "
                                               "criteria targeting the requirement.\n\n" + requirements),
                Section("Subdomains", subdomains)]
    if judging is None:
        judging = judge_block(None, critic_prompt_version(), extraction, {},
                              no_judge="not recorded")["judging"]
    summary = dict(aggregate) | {"judging": dict(judging)}
    if samples is not None:
        page = pathlib.Path(samples(out)).name
        sections.append(Section("Per-sample page", f"[{page}]({page}): every query with its response (answer and "
                                "plan apart) and each criterion's score and reason, filterable by domain and "
                                "language, the queries the seeds or judges disagree on most first."))
    if extraction is not None:
        summary["answer_extraction"] = dict(extraction)
        sections.insert(1, Section("Answer extraction", answer_extraction_markdown(extraction)))
    return write_report(out, "WritingBench", summary, sections)
