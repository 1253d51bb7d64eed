"""WritingBench report: headline table, domain bars on the leaderboard's x10 scale, requirement subsets."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Mapping

from jaxwrite.common.plots import bar_chart
from jaxwrite.evals.report import Section, answer_extraction_markdown, markdown_table, write_report
from jaxwrite.evals.writingbench_aggregate import leaderboard_scale
from jaxwrite.evals.writingbench_data import REQUIREMENTS


def writingbench_report(aggregate: Mapping[str, Any], out_dir: str | os.PathLike, judge_note: str = "",
                        extraction: Mapping[str, Any] | None = None) -> dict[str, pathlib.Path]:
    """Writes summary.json (the aggregate itself, 1-10 scale), report.md and report.html.

    extraction: the score file's `answer_extraction` metadata; when given it is added to summary.json
    and the report shows its counts and the malformed responses, which the aggregate leaves out.
    """
    out = pathlib.Path(out_dir)
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
    summary = dict(aggregate)
    if extraction is not None:
        summary["answer_extraction"] = dict(extraction)
        sections.insert(1, Section("Answer extraction", answer_extraction_markdown(extraction)))
    return write_report(out, "WritingBench", summary, sections)
