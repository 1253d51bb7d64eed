"""Critic scores of teacher responses against each query's own criteria, resumable.

The critic call is WritingBench's, unchanged: `jaxwrite.evals.critic_request` (official system prompt,
`str.format` user template with the criterion dict, official sampling) and `parse_critic_output`; the
response is cut after the first `</think>\\n\\n` as the current official code does (`strip_think`).
An invalid verdict is re-sampled with a new seed, up to the official budget (5 tries x 3 loops); a
criterion still without a valid verdict goes to `<output stem>.failures.jsonl`, and its response gets
no score line (it is never scored with a default), so a re-run tries again and the filter step counts
it as unscored. A permanent critic error (a 4xx, a prompt too long for the critic's context) is not
re-asked: the run reports it with the server's message, apart from transient errors (timeouts, 5xx:
a re-run retries them) and from verdicts that never parsed (a re-run samples again).

Output: one line per response `{response_id, id, sample, scores: {criterion name: [{score, reason}]},
score}` with `score` the mean of the five criterion scores (WritingBench's per-query score S(q)).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from jaxwrite.chat import ChatModel, ChatResult
from jaxwrite.common import InputError, RecordJob, read_jsonl
from jaxwrite.common.record_job import FAILURE_KINDS
from jaxwrite.evals.writingbench_critic import critic_request, parse_critic_output
from jaxwrite.evals.writingbench_score import OFFICIAL_ATTEMPTS
from jaxwrite.prep.criteria import read_criteria
from jaxwrite.prep.labelling import failures_path, request_seed
from jaxwrite.prep.teacher import response_id
from jaxwrite.text import strip_think_for_judge


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
                    out_path: str | os.PathLike, *, strip_think: bool = True, attempts: int = OFFICIAL_ATTEMPTS,
                    batch_size: int = 8, constrain_json: bool = False, progress: bool = True) -> dict[str, Any]:
    """Scores every response not yet in `out_path`; returns the summary of this pass."""
    out_path = os.fspath(out_path)
    criteria = {str(rec["id"]): rec for _, rec in read_criteria(criteria_path)}
    responses = [rec for _, rec in read_responses(responses_path, criteria)]
    job = RecordJob(out_path, "response_id", desc="critic", unit="response", failures=failures_path(out_path),
                    progress=progress)
    todo = job.pending(responses, id_of=lambda r: r["response_id"])
    summary = {"step": "critic_scores", "output": out_path, "critic": critic.label, "strip_think": strip_think,
               "constrain_json": constrain_json, "attempts": attempts, "responses": len(responses),
               "resumed": job.resumed, "scored": 0, "failed": 0, "failed_criteria": 0,
               "invalid_verdicts": 0}
    for chunk in job.batches(todo, batch_size):
        texts = {r["response_id"]: strip_think_for_judge(r["response"]) if strip_think else r["response"]
                 for r in chunk}
        by_id = {r["response_id"]: r for r in chunk}
        verdicts: dict[str, dict[int, tuple[int, str]]] = {rid: {} for rid in by_id}
        pending = [(rid, pos) for rid in by_id for pos in range(len(criteria[str(by_id[rid]["id"])]["checklist"]))]
        last: dict[tuple[str, int], ChatResult] = {}
        tries: dict[tuple[str, int], int] = {}
        given_up: list[tuple[str, int]] = []
        for attempt in range(attempts):
            if not pending:
                break
            requests = []
            for rid, pos in pending:
                query = criteria[str(by_id[rid]["id"])]
                requests.append(critic_request(query["query"], query["checklist"][pos], texts[rid],
                                               request_seed(rid, pos, attempt), constrain_json))
            still = []
            for key, result in zip(pending, critic.chat(requests)):
                parsed = parse_critic_output(result.text) if result.ok else None
                if parsed is None:
                    # A permanent error fails the same way on every re-ask: stop asking.
                    (given_up if result.permanent else still).append(key)
                    last[key], tries[key] = result, attempt + 1
                    summary["invalid_verdicts"] += 1
                else:
                    verdicts[key[0]][key[1]] = parsed
            pending = still
        order = {rid: n for n, rid in enumerate(by_id)}
        pending = sorted(given_up + pending, key=lambda key: (order[key[0]], key[1]))
        failed = dict.fromkeys(rid for rid, _ in pending)   # each failed response once, in order
        for rid in failed:
            keys = [key for key in pending if key[0] == rid]
            # The response is told by its gravest criterion: permanent, then transient, then unparseable.
            first = min((last[k] for k in keys), key=lambda r: FAILURE_KINDS.index(r.failure_kind))
            job.fail([{"response_id": rid, "criterion": criteria[str(by_id[rid]["id"])]["checklist"][pos]["name"],
                       "attempts": tries[(rid, pos)], "error": last[(rid, pos)].error or "unparseable verdict",
                       "permanent": last[(rid, pos)].permanent, "kind": last[(rid, pos)].failure_kind,
                       "last_output": last[(rid, pos)].text[:2000]} for _, pos in keys],
                     error=first.error or "unparseable verdict", kind=first.failure_kind)
        for rid, rec in by_id.items():
            if rid in failed:
                continue
            checklist = criteria[str(rec["id"])]["checklist"]
            scores = {c["name"]: [{"score": verdicts[rid][pos][0], "reason": verdicts[rid][pos][1]}]
                      for pos, c in enumerate(checklist)}
            mean = sum(v[0] for v in verdicts[rid].values()) / len(checklist)
            job.write({"response_id": rid, "id": rec["id"], "sample": rec["sample"], "scores": scores, "score": mean})
        summary["failed_criteria"] += len(pending)
        job.note(failed=job.failed)
    job.close()
    return summary | {"scored": job.written, "failed": job.failed, "failed_by_kind": job.failed_by_kind}
