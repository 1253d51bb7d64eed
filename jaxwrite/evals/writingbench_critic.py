"""The WritingBench critic: its call, byte for byte as the official evaluator builds and parses it, and
the one scorer that asks it criterion by criterion (`eval writingbench score` and `prep critic-score`)."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Mapping, Sequence

from jaxwrite.chat import Asked, ChatModel, ChatRequest, SamplingParams, ask_until_valid, describe_model, request_seed
from jaxwrite.chat.ask import gravest
from jaxwrite.common.record_job import RecordJob
from jaxwrite.evals.judges import UNPARSEABLE_VERDICT
from jaxwrite.evals.local_judge import score_logit_fields
from jaxwrite.prompts import critic_messages

# Official critic sampling: temperature 1.0, top_p 0.95, no top_k, up to 2,048 new tokens.
CRITIC_SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, top_k=None, max_new_tokens=2048)
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                   "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


def critic_request(query: str, criterion: dict[str, str], response: str, seed: int | None,
                   constrain_json: bool = False) -> ChatRequest:
    """One judge request: the official messages (`jaxwrite.prompts.critic_messages`) and sampling.
    `constrain_json` asks a capable judge for schema-constrained output; it changes the metric, so the
    caller records it."""
    return ChatRequest(messages=tuple(critic_messages(query, criterion, response)),
                       sampling=dataclasses.replace(CRITIC_SAMPLING, seed=seed),
                       json_schema=VERDICT_SCHEMA if constrain_json else None)


def parse_critic_output(text: str) -> tuple[int, str] | None:
    """(score 1..10, reason) from the critic's text, or None when the verdict is invalid.

    As upstream: strip the character set `json|\\`` from both ends, then `json.loads`. A score must be
    an int or an integral float (a bool or a string is rejected); never `eval` the text.
    """
    try:
        verdict = json.loads(text.strip("json|```"))  # noqa: B005 (a character set, as upstream strips)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(verdict, dict):
        return None
    score, reason = verdict.get("score"), verdict.get("reason")
    if isinstance(score, bool) or not isinstance(reason, str):
        return None
    if isinstance(score, float):
        if not score.is_integer():
            return None
        score = int(score)
    if not isinstance(score, int) or not 1 <= score <= 10:
        return None
    return score, reason


# ----------------------------------------------------------------------------- scoring with the critic

# Official budget: 5 re-samples per criterion, the whole loop repeated up to 3 times.
OFFICIAL_ATTEMPTS = 5 * 3


@dataclasses.dataclass(frozen=True)
class CriticTask:
    """One response to score against its query's criteria.

    id: the record's id in the score file; response: the text the critic sees (after answer
    extraction); seed: what each request's seed is drawn from, before (criterion position, attempt)."""
    id: Any
    query: str
    checklist: Sequence[dict[str, str]]
    response: str
    seed: tuple


@dataclasses.dataclass
class CriticPass:
    """What one batch of `score_with_critic` asked: criteria left without a valid verdict, and every
    answer that was not one (errors included)."""
    failed_criteria: int = 0
    invalid_verdicts: int = 0


def score_with_critic(critic: ChatModel, job: RecordJob, tasks: Sequence[CriticTask], *,
                      record: Callable[[CriticTask, list[dict[str, Any]]], dict[str, Any]],
                      failure_fields: Mapping[str, Any] | None = None, attempts: int = OFFICIAL_ATTEMPTS,
                      constrain_json: bool = False) -> CriticPass:
    """Asks the critic for a verdict on every (task, criterion) until one parses (`attempts` tries, the
    official 5 x 3 by default; a permanent error is asked once), and writes each task's record,
    `record(task, verdicts in checklist order)`, to `job` as soon as its last criterion has one.

    A verdict is {score, reason}; a score_logit judge's also keep `score_argmax` and `score_expected`.
    A task with a criterion left without a valid verdict is not written, never scored with a default
    (a re-run asks again): `job.fail` records one line per such criterion ({id, criterion,
    **failure_fields, attempts, error, permanent, kind, last_output}), and the task's failure is told
    by its gravest criterion (a permanent error, then a transient one, then answers that never parsed).
    """
    logit = describe_model(critic)["mode"] == "score_logit"
    verdicts: list[dict[int, dict[str, Any]]] = [{} for _ in tasks]
    keys = [(n, pos) for n, task in enumerate(tasks) for pos in range(len(task.checklist))]

    def ask(key: tuple[int, int], attempt: int) -> ChatRequest:
        task = tasks[key[0]]
        return critic_request(task.query, task.checklist[key[1]], task.response,
                              request_seed(*task.seed, key[1], attempt), constrain_json)

    def check(text: str, _key) -> tuple[dict[str, Any] | None, str | None]:
        parsed = parse_critic_output(text)
        if parsed is None:
            return None, UNPARSEABLE_VERDICT
        return {"score": parsed[0], "reason": parsed[1], **(score_logit_fields(text) if logit else {})}, None

    def write_when_complete(asked: Asked) -> None:
        n, pos = asked.item
        verdicts[n][pos] = asked.value
        if len(verdicts[n]) == len(tasks[n].checklist):
            job.write(record(tasks[n], [verdicts[n][p] for p in range(len(tasks[n].checklist))]))

    asked = ask_until_valid(critic, keys, ask, check, attempts=attempts, on_valid=write_when_complete)
    failed: dict[int, list[Asked]] = {}
    for a in asked:
        if not a.accepted:
            failed.setdefault(a.item[0], []).append(a)
    for n, criteria in failed.items():
        task, first = tasks[n], gravest(criteria)
        job.fail([{job.id_key: task.id, "criterion": task.checklist[a.item[1]]["name"], **(failure_fields or {}),
                   **a.failure()} for a in criteria], error=first.error, kind=first.kind)
    return CriticPass(failed_criteria=sum(map(len, failed.values())),
                      invalid_verdicts=sum(len(a.reasons) for a in asked))
