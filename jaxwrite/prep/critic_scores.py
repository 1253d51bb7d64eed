"""Critic scores of teacher responses against each query's own criteria, resumable.

The critic call and its loop are WritingBench's, unchanged: `jaxwrite.evals.score_with_critic` (the
official prompt and sampling, the parse rule, re-sampling up to the official budget of 5 tries x 3 loops
with a new seed each time, a permanent critic error asked once). What of each response the critic sees
follows the one answer-extraction rule of every scorer (`answer_extraction`, default "auto": the
<answer> block of think/answer outputs, else the official cut after the first `</think>\\n\\n`); a
malformed think/answer response is not scored, and counted. A criterion still without a valid verdict
goes to `<output stem>.failures.jsonl` with its kind (permanent, transient, unparseable), and its
response gets no score line (it is never scored with a default), so a re-run tries again and the filter
step counts it as unscored.

Output: one line per response `{response_id, id, sample, scores: {criterion name: [{score, reason}]},
score}` with `score` the mean of the five criterion scores (WritingBench's per-query score S(q)).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Mapping

from jaxwrite.chat import ChatModel, metered
from jaxwrite.common import InputError, RecordJob, read_jsonl
from jaxwrite.evals.responses import answer_extraction_mode, extract_answers
from jaxwrite.evals.writingbench_critic import OFFICIAL_ATTEMPTS, CriticTask, score_with_critic
from jaxwrite.prep.criteria import read_criteria
from jaxwrite.prep.labelling import failures_path, run_usage
from jaxwrite.prep.teacher import response_id


def read_responses(path: str | os.PathLike, known_ids: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(line, record) of a responses file; ids must be in `known_ids` (str(id) -> id), response ids unique."""
    path = os.fspath(path)
    out, seen = [], {}
    for line, rec in read_jsonl(path, required=("response_id", "id", "sample", "response")):
        if str(rec["id"]) not in known_ids:
            raise InputError(f"expected an id of the criteria file, found {rec['id']!r}", path=path, line=line,
                             field="id")
        sample = rec["sample"]
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            raise InputError(f"expected a non-negative integer, found {sample!r}", path=path, line=line,
                             field="sample")
        if rec["response_id"] != response_id(rec["id"], sample):
            raise InputError(f"expected {response_id(rec['id'], sample)!r}", path=path, line=line,
                             field="response_id")
        if rec["response_id"] in seen:
            raise InputError(f"expected unique response ids, {rec['response_id']!r} repeats (first on line "
                             f"{seen[rec['response_id']]})", path=path, line=line, field="response_id")
        seen[rec["response_id"]] = line
        if not isinstance(rec["response"], str):
            raise InputError("expected a string", path=path, line=line, field="response")
        out.append((line, rec))
    return out


def score_responses(criteria_path: str | os.PathLike, responses_path: str | os.PathLike, critic: ChatModel,
                    out_path: str | os.PathLike, *, answer_extraction: str = "auto",
                    attempts: int = OFFICIAL_ATTEMPTS, batch_size: int = 8, constrain_json: bool = False,
                    progress: bool = True) -> dict[str, Any]:
    """Scores every response not yet in `out_path`; returns the summary of this pass."""
    out_path = os.fspath(out_path)
    critic = metered(critic)
    start = critic.usage.copy()
    criteria = {str(rec["id"]): rec for _, rec in read_criteria(criteria_path)}
    responses = [rec for _, rec in read_responses(responses_path, criteria)]
    answers = extract_answers({r["response_id"]: r for r in responses}, answer_extraction_mode(answer_extraction))
    texts = answers.scorable()
    extraction = {k: v for k, v in answers.summary().items() if k != "malformed_items"}
    if extraction["malformed"]:
        print(f"warning: {extraction['malformed']} responses are malformed think/answer outputs and are not "
              f"scored ({', '.join(extraction['malformed_reasons'])})", file=sys.stderr)
    job = RecordJob(out_path, "response_id", desc="critic", unit="response", failures=failures_path(out_path),
                    progress=progress)
    todo = job.pending([r for r in responses if r["response_id"] in texts], id_of=lambda r: r["response_id"])
    summary = {"step": "critic_scores", "output": out_path, "critic": critic.label, "answer_extraction": extraction,
               "constrain_json": constrain_json, "attempts": attempts, "responses": len(responses),
               "resumed": job.resumed, "scored": 0, "failed": 0, "failed_criteria": 0, "invalid_verdicts": 0}
    by_id = {r["response_id"]: r for r in responses}

    def score_line(task: CriticTask, verdicts: list[dict[str, Any]]) -> dict[str, Any]:
        scores = {c["name"]: [{"score": v["score"], "reason": v["reason"]}] for c, v in zip(task.checklist, verdicts)}
        return {"response_id": task.id, "id": by_id[task.id]["id"], "sample": by_id[task.id]["sample"],
                "scores": scores, "score": sum(v["score"] for v in verdicts) / len(verdicts)}

    for chunk in job.batches(todo, batch_size):
        tasks = [CriticTask(r["response_id"], criteria[str(r["id"])]["query"], criteria[str(r["id"])]["checklist"],
                            texts[r["response_id"]], (r["response_id"],)) for r in chunk]
        done = score_with_critic(critic, job, tasks, record=score_line, attempts=attempts,
                                 constrain_json=constrain_json)
        summary["failed_criteria"] += done.failed_criteria
        summary["invalid_verdicts"] += done.invalid_verdicts
        job.note(failed=job.failed)
    job.close()
    return summary | {"scored": job.written, "failed": job.failed, "failed_by_kind": job.failed_by_kind,
                      "usage": run_usage(critic, start, out_path, "critic")}

