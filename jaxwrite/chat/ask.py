"""Asking a chat model until its answer is valid: the one loop every model-calling step runs.

`ask_until_valid` asks a batch of items, checks each answer, and asks again those that failed, up to
`attempts` asks per item:

- an answer that comes back but does not pass the caller's check is asked again, afresh with the
  next attempt's request (the caller gives each attempt its own reproducible seed, `request_seed`), or,
  with `reask`, in the same conversation with a user turn naming what was wrong (a capable chat model
  mends its answer). When the model cannot take that longer conversation (any error, e.g. past a local
  model's context), the same attempt is asked once more in a fresh conversation with a seed of its own;
- a transient error (a timeout, a 5xx) is asked again up to the limit;
- a permanent error (a 4xx, a prompt the engine refuses) fails the same way every time, so it is not
  asked again.

Each item ends `Asked`: its accepted value, or why it failed as `RecordJob.fail` counts it (the kind of
its last answer: "permanent", "transient" or "unparseable"), with its error, how often it was asked and
its last output cut to `LAST_OUTPUT_CHARS` (`Asked.failure`). Answers the check turned down are
reported to the model (`reject_answers`), so a call cache never serves them to a later run.
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Any, Callable, Generic, Sequence, TypeVar

from jaxwrite.chat.interface import ChatModel, ChatRequest, ChatResult
from jaxwrite.chat.metered import reject_answers
from jaxwrite.common.record_failures import FAILURE_KINDS

T = TypeVar("T")

LAST_OUTPUT_CHARS = 2000   # how much of a failed item's last answer its failure line keeps
MODEL_ERROR = "model_error"   # the reason recorded for an ask that got an error instead of an answer


def request_seed(*parts: Any) -> int:
    """A reproducible sampling seed from what identifies one ask (run seed, item, attempt, ...): asks
    differ from each other, and a re-run asks with the same seeds. Non-negative, below 2**31."""
    return zlib.crc32(":".join(map(str, parts)).encode()) & 0x7FFFFFFF


@dataclasses.dataclass
class Asked(Generic[T]):
    """How asking about one item ended: `value` when an answer passed the check (`accepted`), else
    the answers that came back (`results`, one per attempt) and why each was turned down (`reasons`)."""
    item: T
    value: Any = None
    accepted: bool = False
    results: list[ChatResult] = dataclasses.field(default_factory=list)
    reasons: list[str] = dataclasses.field(default_factory=list)   # the check's reason, or MODEL_ERROR
    # Errors of re-asks in the same conversation that the model could not take (asked again afresh).
    reask_errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def tries(self) -> int:
        return len(self.results)

    @property
    def last(self) -> ChatResult:
        return self.results[-1]

    @property
    def answered(self) -> bool:
        """Whether any ask came back with text (not only errors)."""
        return any(r.ok for r in self.results)

    @property
    def kind(self) -> str:
        """Why the item failed (FAILURE_KINDS, as `RecordJob.fail` counts it): its last answer's kind."""
        return self.last.failure_kind

    @property
    def error(self) -> str:
        """The model's error when the last ask got one, else why the last answer was turned down."""
        return self.last.error or self.reasons[-1]

    def failure(self) -> dict[str, Any]:
        """The fields every failure line records: attempts, error, permanent, kind, last_output."""
        return {"attempts": self.tries, "error": self.error, "permanent": self.last.permanent,
                "kind": self.kind, "last_output": self.last.text[:LAST_OUTPUT_CHARS]}


def gravest(asked: Sequence[Asked]) -> Asked:
    """Of several failed asks that make one record (e.g. its criteria), the one that tells the record's
    failure: a permanent error first, then a transient one, then answers that never passed."""
    return min(asked, key=lambda a: FAILURE_KINDS.index(a.kind))


def ask_until_valid(model: ChatModel, items: Sequence[T], request: Callable[[T, int], ChatRequest],
                    check: Callable[[str, T], tuple[Any, str | None]], *, attempts: int,
                    reask: Callable[[str], str] | None = None,
                    on_valid: Callable[[Asked[T]], None] | None = None) -> list[Asked[T]]:
    """Asks about every item until its answer passes `check`, at most `attempts` times; returns one
    `Asked` per item, in order.

    request(item, attempt): the fresh request of attempt 0, 1, ... (its own seed, so re-asks differ).
    check(text, item): (value, None) accepts an answer; (None, reason) turns it down.
    reask(reason): the user turn that re-asks in the same conversation (None: always ask afresh).
    on_valid(asked): called as each item's answer is accepted, e.g. to write it at once.
    """
    if attempts < 1:
        raise ValueError(f"attempts: expected at least 1, got {attempts}")
    out = [Asked(item) for item in items]
    continued: dict[int, tuple[dict[str, str], ...]] = {}   # a conversation to continue, by item position
    pending = list(range(len(items)))
    for attempt in range(attempts):
        if not pending:
            break
        fresh = [request(items[i], attempt) for i in pending]
        sent = [dataclasses.replace(req, messages=continued[i]) if i in continued else req
                for i, req in zip(pending, fresh)]
        results = model.chat(sent)
        _fresh_fallbacks(model, out, pending, fresh, sent, results, continued)
        still, turned_down = [], []
        for i, req, result in zip(pending, sent, results):
            asked = out[i]
            asked.results.append(result)
            value, reason = check(result.text, items[i]) if result.ok else (None, MODEL_ERROR)
            if reason is None:
                asked.value, asked.accepted = value, True
                if on_valid is not None:
                    on_valid(asked)
                continue
            asked.reasons.append(reason)
            if result.ok:
                turned_down.append(req)
            if result.permanent:   # asking again fails the same way
                continue
            still.append(i)
            if result.ok and reask is not None:   # name what was wrong, in the same conversation
                continued[i] = req.messages + ({"role": "assistant", "content": result.text},
                                               {"role": "user", "content": reask(reason)})
        reject_answers(model, turned_down)   # a call cache serves none of them again
        pending = still
    return out


def _fresh_fallbacks(model: ChatModel, out: list[Asked], pending: list[int], fresh: list[ChatRequest],
                     sent: list[ChatRequest], results: list[ChatResult], continued: dict[int, tuple]) -> None:
    """Re-asks afresh, with a seed of its own, each continued conversation that came back with an
    error, replacing its request and result in place; its conversation starts over."""
    retry = [n for n, i in enumerate(pending) if not results[n].ok and i in continued]
    if not retry:
        return
    again = []
    for n in retry:
        out[pending[n]].reask_errors.append((results[n].error or "")[:300])
        del continued[pending[n]]
        seed = request_seed(fresh[n].sampling.seed, "fresh")
        again.append(dataclasses.replace(fresh[n], sampling=dataclasses.replace(fresh[n].sampling, seed=seed)))
    for n, req, result in zip(retry, again, model.chat(again)):
        sent[n], results[n] = req, result
