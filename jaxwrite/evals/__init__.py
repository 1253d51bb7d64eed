"""Evaluation: judges (HTTP, local engine), WritingBench, LongBench-Write, pairwise arena, RefineBench,
judge-human agreement, reports.

Judges are chat models (`jaxwrite.chat`) answering batches of `ChatRequest`s; evaluators build those
requests exactly as the official scripts do, ask through `jaxwrite.chat.ask_until_valid`, write verdicts
as they come (resumable jsonl) and aggregate like the official code. `score_with_critic` is the one
WritingBench critic scorer (`eval writingbench score` and `prep critic-score`).
"""
from jaxwrite.evals.local_judge import LocalJudge
from jaxwrite.evals.report import Section, markdown_table, write_report
from jaxwrite.common.plots import bar_chart, length_plot
from jaxwrite.evals.writingbench_data import (RequirementSubset, WritingBenchQuery, load_requirement_subsets,
                                              load_writingbench)
from jaxwrite.evals.writingbench_critic import (OFFICIAL_ATTEMPTS, CriticTask, critic_request, parse_critic_output,
                                                score_with_critic)
from jaxwrite.evals.writingbench_aggregate import (aggregate_writingbench, leaderboard_scale, read_score_file,
                                                   summarize_seeds)
from jaxwrite.evals.writingbench_score import WritingBenchScoring, score_writingbench
from jaxwrite.evals.writingbench_report import writingbench_report
from jaxwrite.evals.longbench_write import (LongWriteItem, length_score, load_longbench_write,
                                            parse_quality_output, quality_request, quality_scores)
from jaxwrite.evals.longbench_write_run import score_longbench_write
# Pairwise arena, RefineBench and judge-human agreement (written alongside, same judge interface).
from jaxwrite.evals.arena import ArenaResult, rate_arena
from jaxwrite.evals.refinebench_loop import run_refinebench
from jaxwrite.evals.refinebench_metrics import refinebench_metrics
from jaxwrite.evals.agreement import judge_human_agreement

__all__ = [
    "LocalJudge",
    "Section", "markdown_table", "write_report", "bar_chart", "length_plot",
    "RequirementSubset", "WritingBenchQuery", "load_requirement_subsets", "load_writingbench",
    "OFFICIAL_ATTEMPTS", "CriticTask", "critic_request", "parse_critic_output",
    "score_with_critic",
    "aggregate_writingbench", "leaderboard_scale", "read_score_file", "summarize_seeds",
    "WritingBenchScoring", "score_writingbench", "writingbench_report",
    "LongWriteItem", "length_score", "load_longbench_write", "parse_quality_output", "quality_request",
    "quality_scores", "score_longbench_write",
    "ArenaResult", "rate_arena", "run_refinebench", "refinebench_metrics", "judge_human_agreement",
]
