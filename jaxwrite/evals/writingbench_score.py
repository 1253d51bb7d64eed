"""Scores WritingBench responses with a critic judge: one call per (query, criterion), resumable.

A query's line goes to the score file (official format) as soon as all five of its criteria have a
valid verdict. A criterion that never yields a valid verdict within the attempt budget is written to
`<scores stem>.failures.jsonl` and its query is left out of the score file, so it is never scored with a
default and a re-run tries it again. A permanent judge error (a 4xx, a prompt too long for the judge's
context) is not re-asked: the run reports it with the server's message instead of advising a re-run.
The job's settings are one `WritingBenchScoring`, written under "settings" to each seed's
`<scores>.meta.json` beside what applied (the judge and its mode, the prompt version, the answer
extraction, the seed); resuming with settings that change the metric (judge, answer extraction, seed,
JSON constraint) is refused. The meta file names the judge's
mode (`judge_info`, `jaxwrite.chat.describe_model`) and only the settings that applied: sampling and
attempts for a judge that samples (the official way); for the non-official score_logit judge, which
samples nothing and asks each criterion once, its score rule instead and which stored figure aggregates
(`aggregates`: each verdict keeps `score_argmax` and `score_expected` beside the official `score`).
Each run appends what its judge calls cost to the meta file's `usage_runs` (requests, tokens, time, cache
hits and misses, cost at the judge's prices: `jaxwrite.chat.Usage`); with several processes, the lead's
share.

Answer extraction (`jaxwrite.evals.responses`; default "auto"): for a think/answer model only the
<answer> block reaches the critic; other models get the official cut through the first
"</think>\n\n". A malformed think/answer response (no <answer>, two, plan only, ...) is not scored:
it is counted, with its problems, in the run and in the meta file's `answer_extraction`.

Response files: one `{"index": i, "response": str}` per line, i a WritingBench index. An unknown or
repeated index, or a non-string response, is an error; queries without a response are skipped and
counted as missing; empty responses are scored as they are (the critic sees an empty answer) and
counted, because an empty answer is the model's output, not a scoring failure.

The score file may be in a bucket (gs://...): it and the files named after it (failures, meta, seeds,
parts) are written in a local staging folder, pulled first and pushed as scores come and at the end
(`jaxwrite.common.remote.StagedOutput`).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
from typing import Any, Iterable, Mapping

from jaxwrite.chat import ChatModel, describe_model, metered, sampling_fields
from jaxwrite.common.errors import InputError
from jaxwrite.common.job_meta import record_usage, write_or_check_meta
from jaxwrite.common.record_job import ProcessShard, RecordJob
from jaxwrite.common.remote import StagedOutput
from jaxwrite.evals.responses import (EXTRACTION_RULES, ResponseAnswers, answer_extraction_mode, extract_answers,
                                      read_response_records)
from jaxwrite.evals.writingbench_aggregate import (aggregate_writingbench, read_score_file, score_failures_path,
                                                   summarize_seeds)
from jaxwrite.evals.writingbench_critic import (CRITIC_SAMPLING, OFFICIAL_ATTEMPTS, CriticTask,
                                                score_with_critic)
from jaxwrite.evals.writingbench_data import (WritingBenchQuery, load_requirement_subsets,
                                              load_writingbench)
from jaxwrite.evals.writingbench_report import critic_prompt_version, writingbench_judging


@dataclasses.dataclass(frozen=True)
class WritingBenchScoring:
    """How one WritingBench scoring job runs: one object from the command line (or a notebook) down to
    each seed's loop, written under "settings" to every seed's `<scores>.meta.json`.

    Attributes:
      data_dir: the data root holding writingbench/ (None: the one data-dir rule).
      answer_extraction: what of each response the critic sees: "auto" (the <answer> block of
        think/answer outputs, else the official cut at the first "</think>\\n\\n"), "think_answer",
        "official_strip" or "none" (`jaxwrite.evals.responses`).
      seeds: judge seeds; several give one score file each and a mean ± std summary.
      indices: score only these WritingBench indices (None: all).
      limit: score only the first N selected queries (None: all).
      batch_queries: queries asked together (their five criteria each go to the judge in one batch).
      attempts: verdicts sampled per criterion until one parses (the official 5 x 3); a score_logit judge,
        which samples nothing, asks each criterion once whatever this says.
      constrain_json: ask a capable judge for schema-constrained verdicts (changes the metric).
      progress: show a progress bar.
    """
    data_dir: str | None = None
    answer_extraction: str = "auto"
    seeds: tuple[int, ...] = (0,)
    indices: tuple[int, ...] | None = None
    limit: int | None = None
    batch_queries: int = 8
    attempts: int = OFFICIAL_ATTEMPTS
    constrain_json: bool = False
    progress: bool = True

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(self.seeds))
        if self.indices is not None:
            object.__setattr__(self, "indices", tuple(self.indices))
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", os.fspath(self.data_dir))
        object.__setattr__(self, "answer_extraction", answer_extraction_mode(self.answer_extraction))
        if self.attempts < 1 or self.batch_queries < 1:
            raise InputError(f"expected attempts and batch_queries of at least 1, got {self.attempts} and "
                             f"{self.batch_queries}")


@dataclasses.dataclass
class ScoringRun:
    """What one seed's pass did; `failed` are queries left unscored (see the failures file)."""
    seed: int
    scores_path: str
    scored: int = 0
    resumed: int = 0
    failed: int = 0
    failed_criteria: int = 0
    missing: int = 0
    empty_responses: int = 0
    malformed: int = 0  # think/answer responses without a scorable answer: not scored


@dataclasses.dataclass(frozen=True)
class _Selection:
    """The queries one job scores: the benchmark, the response file's answers, the indices chosen."""
    queries: Mapping[int, WritingBenchQuery]
    answers: ResponseAnswers
    selected: list[int]


def read_answers(path: str | os.PathLike, queries: Mapping[int, WritingBenchQuery],
                 mode: str = "auto") -> ResponseAnswers:
    """A response file `{"index": i, "response": str}` under an answer-extraction mode; file:line errors
    for unknown or repeated indices and non-string responses."""
    records = read_response_records(path, valid=queries, expected=f"a WritingBench index (1..{len(queries)})")
    return extract_answers(records, mode)


def seed_scores_path(out_path: str | os.PathLike, seed: int, num_seeds: int) -> pathlib.Path:
    """`out_path` itself for one seed; `<stem>.seed<k><suffix>` beside it for several."""
    out = pathlib.Path(out_path)
    return out if num_seeds == 1 else out.with_name(f"{out.stem}.seed{seed}{out.suffix}")


def score_writingbench(responses_path: str | os.PathLike, judge: ChatModel, out_path: str | os.PathLike,
                       scoring: WritingBenchScoring = WritingBenchScoring(), *,
                       shard: ProcessShard | None = None) -> dict[str, Any]:
    """Scores every selected query once per seed; returns per-seed runs + aggregates and their mean ± std.

    shard: this process's share when several score one output (each judges every count-th query into
    its own part; the lead merges them and writes the settings), so every process returns the same result.
    """
    with StagedOutput(out_path, tag=shard.tag if shard else "") as staged:
        result = _score(responses_path, metered(judge), staged.path, scoring, shard, staged.mirror)
    for run in result["runs"]:   # named as the caller named them (in the bucket)
        run["scores_path"] = staged.shown(run["scores_path"])
    return result


def _score(responses_path, judge: ChatModel, out_path: str, scoring: WritingBenchScoring,
           shard: ProcessShard | None, mirror) -> dict[str, Any]:
    queries = load_writingbench(scoring.data_dir)
    subsets = load_requirement_subsets(scoring.data_dir)
    answers = read_answers(responses_path, queries, scoring.answer_extraction)
    selected = sorted(queries) if scoring.indices is None else _check_indices(scoring.indices, queries)
    if scoring.limit is not None:
        selected = selected[:scoring.limit]
    extraction = answers.summary(selected)
    strip = answers.applied != "none"
    sampled = describe_model(judge)["mode"] == "generate"
    # A score read from logits is the same on every try: one attempt, and no sampling applies.
    scoring = scoring if sampled else dataclasses.replace(scoring, attempts=1)
    info = describe_model(judge, CRITIC_SAMPLING, scoring.attempts)
    data = _Selection(queries, answers, selected)
    runs, aggregates, metas = [], [], []
    start = judge.usage.copy()
    for seed in scoring.seeds:
        path = seed_scores_path(out_path, seed, len(scoring.seeds))
        meta = {"judge": judge.label, "judge_info": info, "prompt": critic_prompt_version(), "strip_think": strip,
                "response_preprocessing": EXTRACTION_RULES[answers.applied],
                "answer_extraction": extraction, "seed": seed, "constrain_json": scoring.constrain_json,
                **({"sampling": sampling_fields(CRITIC_SAMPLING), "attempts": scoring.attempts} if sampled else {}),
                "aggregates": "score" if sampled else "score_argmax",
                "responses": os.fspath(responses_path), "settings": dataclasses.asdict(scoring)}
        if shard is None or shard.is_lead:
            write_or_check_meta(path, meta, metric_settings)
            if mirror is not None:
                mirror.push()   # the settings reach the bucket before any score, so a resume checks them
        metas.append(meta)
        run = ScoringRun(seed=seed, scores_path=str(path))
        before = judge.usage.copy()
        _score_one_seed(run, scoring, data, judge, shard=shard, mirror=mirror)
        if shard is None or shard.is_lead:   # each seed's file keeps what its runs spent
            metas[-1] = record_usage(path, {"judge": judge.usage_dict(judge.usage.since(before))})
        runs.append(dataclasses.asdict(run))
        scores = read_score_file(path, queries) if path.exists() else {}
        aggregates.append(aggregate_writingbench(scores, queries, subsets))
    # `judging`: who judged and how, with the first seed's failures (what a report of this result shows)
    # and what this run's calls cost over every seed.
    judging = writingbench_judging(metas[0], runs[0]["scores_path"])
    judging["usage"] = {"judge": judge.usage_dict(judge.usage.since(start)) | {"scope": "this run"}}
    return {"judge": judge.label, "judge_info": info, "strip_think": strip, "answer_extraction": extraction,
            "judging": judging,
            "runs": [r | {"aggregate": a} for r, a in zip(runs, aggregates)],
            "summary": summarize_seeds(aggregates)}


def _check_indices(indices: Iterable[int], queries: Mapping[int, WritingBenchQuery]) -> list[int]:
    chosen = sorted(set(indices))
    unknown = [i for i in chosen if i not in queries]
    if unknown:
        raise InputError(f"--indices: expected WritingBench indices 1..{len(queries)}, found {unknown[:5]}")
    return chosen


def metric_settings(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a score file's metadata that change the metric (a resume must keep them); meta
    files written before answer extraction existed applied the official cut when strip_think was set."""
    extraction = meta.get("answer_extraction")
    applied = extraction.get("applied") if isinstance(extraction, Mapping) else \
        ("official_strip" if meta.get("strip_think") else "none")
    return {"judge": meta.get("judge"), "strip_think": meta.get("strip_think"), "answer_extraction": applied,
            "seed": meta.get("seed"), "constrain_json": meta.get("constrain_json")}


def _score_one_seed(run: ScoringRun, scoring: WritingBenchScoring, data: _Selection, judge: ChatModel, *,
                    shard: ProcessShard | None = None, mirror=None) -> None:
    job = RecordJob(run.scores_path, "index", desc=f"writingbench seed {run.seed}", unit="query",
                    failures=score_failures_path(run.scores_path), progress=scoring.progress, shard=shard,
                    mirror=mirror)
    texts = data.answers.scorable(data.selected)
    run.malformed = len(data.answers.malformed(data.selected))
    available = [i for i in data.selected if i in texts]
    run.missing = len(data.selected) - len(available) - run.malformed
    todo = job.pending(available)
    run.resumed = job.resumed
    run.empty_responses = sum(1 for i in available if not texts[i].strip())
    if run.missing:
        print(f"warning: {run.missing} selected queries have no response and are not scored", file=sys.stderr)
    if run.malformed:
        print(f"warning: {run.malformed} selected responses are malformed think/answer outputs and are not "
              "scored; see answer_extraction in the meta file", file=sys.stderr)
    for chunk in job.batches(todo, scoring.batch_queries):
        tasks = [CriticTask(i, data.queries[i].query, data.queries[i].checklist, texts[i], (run.seed, i))
                 for i in chunk]
        done = score_with_critic(judge, job, tasks, record=_score_line, failure_fields={"seed": run.seed},
                                 attempts=scoring.attempts, constrain_json=scoring.constrain_json)
        run.failed_criteria += done.failed_criteria
        job.note(failed=job.failed)
    job.close()
    run.scored, run.failed = job.written, job.failed


def _score_line(task: CriticTask, verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """The official line ({criterion: [{score, reason}]}); score_logit verdicts add their two figures."""
    return {"index": task.id, "scores": {c["name"]: [v] for c, v in zip(task.checklist, verdicts)}}
