"""Scores WritingBench responses with a critic judge: one call per (query, criterion), resumable.

A query's line goes to the score file (official format) as soon as all five of its criteria have a
valid verdict. A criterion that never yields a valid verdict within the attempt budget is written to
`<scores stem>.failures.jsonl` and its query is left out of the score file, so it is never scored with a
default and a re-run tries it again. A permanent judge error (a 4xx, a prompt too long for the judge's
context) is not re-asked: the run reports it with the server's message instead of advising a re-run.
Settings that change the metric (judge, answer extraction, seed, JSON constraint) go to
`<scores>.meta.json`; resuming with different settings is refused. The meta file names the judge's
mode (`judge_info`, `jaxwrite.chat.describe_model`) and only the settings that applied: sampling and
attempts for a judge that samples (the official way); for the non-official score_logit judge, which
samples nothing and asks each criterion once, its score rule instead and which stored figure aggregates
(`aggregates`: each verdict keeps `score_argmax` and `score_expected` beside the official `score`).

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
import json
import os
import pathlib
import sys
import zlib
from typing import Any, Iterable, Mapping, Sequence

from jaxwrite.chat import ChatResult, describe_model, sampling_fields
from jaxwrite.common.errors import InputError
from jaxwrite.common.record_job import FAILURE_KINDS, ProcessShard, RecordJob
from jaxwrite.common.remote import StagedOutput
from jaxwrite.evals.judges import Judge
from jaxwrite.evals.local_judge import score_logit_fields
from jaxwrite.evals.responses import (EXTRACTION_RULES, ResponseAnswers, answer_extraction_mode,
                                      extract_answers, read_indexed_responses, read_response_records)
from jaxwrite.evals.writingbench_aggregate import (aggregate_writingbench, read_score_file, score_failures_path,
                                                   summarize_seeds)
from jaxwrite.evals.writingbench_critic import CRITIC_SAMPLING, critic_request, parse_critic_output
from jaxwrite.evals.writingbench_data import (WritingBenchQuery, load_requirement_subsets,
                                              load_writingbench)
from jaxwrite.evals.writingbench_report import critic_prompt_version, writingbench_judging

# Official budget: 5 re-samples per criterion, the whole loop repeated up to 3 times.
OFFICIAL_ATTEMPTS = 5 * 3


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


def read_responses(path: str | os.PathLike, queries: Mapping[int, WritingBenchQuery]) -> dict[int, str]:
    """{index: response} with file:line errors for unknown or repeated indices and non-string responses."""
    return read_indexed_responses(path, queries, f"a WritingBench index (1..{len(queries)})")


def read_answers(path: str | os.PathLike, queries: Mapping[int, WritingBenchQuery],
                 mode: str = "auto") -> ResponseAnswers:
    """The response file under an answer-extraction mode, with the same checks as `read_responses`."""
    records = read_response_records(path, valid=queries, expected=f"a WritingBench index (1..{len(queries)})")
    return extract_answers(records, mode)


def seed_scores_path(out_path: str | os.PathLike, seed: int, num_seeds: int) -> pathlib.Path:
    """`out_path` itself for one seed; `<stem>.seed<k><suffix>` beside it for several."""
    out = pathlib.Path(out_path)
    return out if num_seeds == 1 else out.with_name(f"{out.stem}.seed{seed}{out.suffix}")


def score_writingbench(responses_path: str | os.PathLike, judge: Judge, out_path: str | os.PathLike,
                       data_dir: str | os.PathLike | None = None, *, strip_think: bool | None = None,
                       answer_extraction: str | None = None,
                       seeds: Sequence[int] = (0,), indices: Iterable[int] | None = None,
                       limit: int | None = None, batch_queries: int = 8,
                       attempts: int = OFFICIAL_ATTEMPTS, constrain_json: bool = False,
                       progress: bool = True, shard: ProcessShard | None = None) -> dict[str, Any]:
    """Scores every selected query once per seed; returns per-seed runs + aggregates and their mean ± std.

    shard: this process's share when several score one output (each judges every count-th query into
    its own part; the lead merges them and writes the settings), so every process returns the same result.

    answer_extraction: "auto" (default), "think_answer", "official_strip" or "none"; the older
    strip_think=False still means "none".
    """
    with StagedOutput(out_path, tag=shard.tag if shard else "") as staged:
        result = _score(responses_path, judge, staged.path, data_dir=data_dir, strip_think=strip_think,
                        answer_extraction=answer_extraction, seeds=seeds, indices=indices, limit=limit,
                        batch_queries=batch_queries, attempts=attempts, constrain_json=constrain_json,
                        progress=progress, shard=shard, mirror=staged.mirror)
    for run in result["runs"]:   # named as the caller named them (in the bucket)
        run["scores_path"] = staged.shown(run["scores_path"])
    return result


def _score(responses_path, judge: Judge, out_path: str, *, data_dir, strip_think, answer_extraction,
           seeds: Sequence[int], indices, limit, batch_queries: int, attempts: int, constrain_json: bool,
           progress: bool, shard: ProcessShard | None, mirror) -> dict[str, Any]:
    queries = load_writingbench(data_dir)
    subsets = load_requirement_subsets(data_dir)
    answers = read_answers(responses_path, queries, answer_extraction_mode(answer_extraction, strip_think))
    selected = sorted(queries) if indices is None else _check_indices(indices, queries)
    if limit is not None:
        selected = selected[:limit]
    extraction = answers.summary(selected)
    strip = answers.applied != "none"
    sampled = describe_model(judge)["mode"] == "generate"
    # A score read from logits is the same on every try: one attempt, and no sampling applies.
    attempts = attempts if sampled else 1
    info = describe_model(judge, CRITIC_SAMPLING, attempts)
    runs, aggregates, metas = [], [], []
    for seed in seeds:
        path = seed_scores_path(out_path, seed, len(seeds))
        meta = {"judge": judge.label, "judge_info": info, "prompt": critic_prompt_version(), "strip_think": strip,
                "response_preprocessing": EXTRACTION_RULES[answers.applied],
                "answer_extraction": extraction, "seed": seed, "constrain_json": constrain_json,
                **({"sampling": sampling_fields(CRITIC_SAMPLING), "attempts": attempts} if sampled else {}),
                "aggregates": "score" if sampled else "score_argmax",
                "responses": os.fspath(responses_path)}
        if shard is None or shard.is_lead:
            _write_or_check_meta(path, meta)
            if mirror is not None:
                mirror.push()   # the settings reach the bucket before any score, so a resume checks them
        metas.append(meta)
        run = ScoringRun(seed=seed, scores_path=str(path))
        _score_one_seed(run, queries, answers, selected, judge, batch_queries=batch_queries, attempts=attempts,
                        constrain_json=constrain_json, progress=progress, shard=shard, mirror=mirror)
        runs.append(dataclasses.asdict(run))
        scores = read_score_file(path, queries) if path.exists() else {}
        aggregates.append(aggregate_writingbench(scores, queries, subsets))
    # `judging`: who judged and how, with the first seed's failures (what a report of this result shows).
    return {"judge": judge.label, "judge_info": info, "strip_think": strip, "answer_extraction": extraction,
            "judging": writingbench_judging(metas[0], runs[0]["scores_path"]),
            "runs": [r | {"aggregate": a} for r, a in zip(runs, aggregates)],
            "summary": summarize_seeds(aggregates)}


def _check_indices(indices: Iterable[int], queries: Mapping[int, WritingBenchQuery]) -> list[int]:
    chosen = sorted(set(indices))
    unknown = [i for i in chosen if i not in queries]
    if unknown:
        raise InputError(f"--indices: expected WritingBench indices 1..{len(queries)}, found {unknown[:5]}")
    return chosen


def _write_or_check_meta(path: pathlib.Path, meta: dict[str, Any]) -> None:
    meta_path = path.with_name(path.name + ".meta.json")
    if meta_path.exists():
        with open(meta_path, encoding="utf-8") as f:
            old = json.load(f)
        before, now = _metric_settings(old), _metric_settings(meta)
        changed = [k for k in now if before.get(k) != now[k]]
        if changed and path.exists():
            raise InputError(f"expected the settings of the existing scores ({', '.join(changed)} differ: "
                             f"{ {k: before.get(k) for k in changed} }); use a new --output", path=str(meta_path))
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)


def _metric_settings(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that change the metric; meta files written before answer extraction existed
    applied the official cut when strip_think was set, else nothing."""
    extraction = meta.get("answer_extraction")
    applied = extraction.get("applied") if isinstance(extraction, Mapping) else \
        ("official_strip" if meta.get("strip_think") else "none")
    return {"judge": meta.get("judge"), "strip_think": meta.get("strip_think"), "answer_extraction": applied,
            "seed": meta.get("seed"), "constrain_json": meta.get("constrain_json")}


def _request_seed(seed: int, index: int, position: int, attempt: int) -> int:
    """A distinct, reproducible sampling seed per call, so re-samples differ and re-runs repeat."""
    return zlib.crc32(f"{seed}:{index}:{position}:{attempt}".encode()) & 0x7FFFFFFF


def _score_one_seed(run: ScoringRun, queries: Mapping[int, WritingBenchQuery], answers: ResponseAnswers,
                    selected: Sequence[int], judge: Judge, *, batch_queries: int,
                    attempts: int, constrain_json: bool, progress: bool, shard: ProcessShard | None = None,
                    mirror=None) -> None:
    path = run.scores_path
    logit = describe_model(judge)["mode"] == "score_logit"   # its verdicts carry both figures
    failures_path = score_failures_path(path)
    job = RecordJob(path, "index", desc=f"writingbench seed {run.seed}", unit="query", failures=failures_path,
                    progress=progress, shard=shard, mirror=mirror)
    texts = answers.scorable(selected)
    run.malformed = len(answers.malformed(selected))
    available = [i for i in selected if i in texts]
    run.missing = len(selected) - len(available) - run.malformed
    todo = job.pending(available)
    run.resumed = job.resumed
    run.empty_responses = sum(1 for i in available if not texts[i].strip())
    if run.missing:
        print(f"warning: {run.missing} selected queries have no response and are not scored", file=sys.stderr)
    if run.malformed:
        print(f"warning: {run.malformed} selected responses are malformed think/answer outputs and are not "
              "scored; see answer_extraction in the meta file", file=sys.stderr)
    for chunk in job.batches(todo, batch_queries):
        verdicts: dict[int, dict[int, dict[str, Any]]] = {i: {} for i in chunk}
        pending = [(i, pos) for i in chunk for pos in range(len(queries[i].checklist))]
        failed: list[tuple[int, int]] = []
        last: dict[tuple[int, int], ChatResult] = {}
        tries: dict[tuple[int, int], int] = {}
        for attempt in range(attempts):
            if not pending:
                break
            requests = [critic_request(queries[i].query, queries[i].checklist[pos], texts[i],
                                       _request_seed(run.seed, i, pos, attempt), constrain_json)
                        for i, pos in pending]
            results = judge.chat(requests)
            still, given_up = [], []
            for key, result in zip(pending, results):
                parsed = parse_critic_output(result.text) if result.ok else None
                if parsed is None:
                    # A permanent error fails the same way on every re-ask: stop asking.
                    (given_up if result.permanent else still).append(key)
                    last[key], tries[key] = result, attempt + 1
                else:
                    verdicts[key[0]][key[1]] = {"score": parsed[0], "reason": parsed[1],
                                                **(score_logit_fields(result.text) if logit else {})}
            failed += given_up
            pending = still
            waiting = {i for i, _ in pending + failed}
            for i in chunk:
                if i not in waiting and not job.is_done(i):
                    job.write(_score_line(queries[i], verdicts[i]))
        failed = sorted(failed + pending)
        for i in dict.fromkeys(i for i, _ in failed):   # each failed query once, in order
            keys = [(j, pos) for j, pos in failed if j == i]
            # The query is told by its gravest criterion: permanent, then transient, then unparseable.
            first = min((last[k] for k in keys), key=lambda r: FAILURE_KINDS.index(r.failure_kind))
            job.fail([{"index": i, "criterion": queries[i].checklist[pos]["name"], "seed": run.seed,
                       "attempts": tries[(i, pos)], "error": last[(i, pos)].error or "unparseable verdict",
                       "permanent": last[(i, pos)].permanent, "kind": last[(i, pos)].failure_kind,
                       "last_output": last[(i, pos)].text[:2000]}
                      for _, pos in keys],
                     error=first.error or "unparseable verdict", kind=first.failure_kind)
        run.failed_criteria += len(failed)
        job.note(failed=job.failed)
    job.close()
    run.scored, run.failed = job.written, job.failed


def _score_line(query: WritingBenchQuery, verdicts: Mapping[int, dict[str, Any]]) -> dict[str, Any]:
    """The official line ({criterion: [{score, reason}]}); score_logit verdicts add their two figures."""
    return {"index": query.index, "scores": {c["name"]: [verdicts[pos]] for pos, c in enumerate(query.checklist)}}
