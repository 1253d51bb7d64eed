"""The loop shared by model-labelling steps (criteria, long-form labels): ask, validate, re-ask with the
reason, write each accepted record as it comes, and count every reject by reason.

The asking is `jaxwrite.chat.ask_until_valid`. Re-asks (`Labelling.reask`): "same" continues the
conversation, naming what was wrong (what a capable chat model needs); when the generator cannot take
that longer conversation (any per-request error, e.g. past a local model's context), the same attempt
is asked again in a fresh conversation with a new seed, and counted as a `fresh_fallback`. "fresh"
always asks afresh with a new seed: for a model too small to follow a correction, whose earlier answer
would only fill its context.

A record whose answers are all rejected within `attempts`, or whose request the server refuses for good
(a permanent error such as a 400: not asked again), goes to `<output stem>.failures.jsonl` with its
reasons, its failure kind (permanent, transient or unparseable, as the job's closing summary counts
them), its error and last output; it is not written to the output, so a re-run asks again. Records
already in the output (by id) are skipped: re-running resumes.
"""
from __future__ import annotations

import collections
import dataclasses
import pathlib
from typing import Any, Callable, Mapping, Sequence

from jaxwrite.chat import (Asked, ChatModel, ChatRequest, MeteredChatModel, SamplingParams, Usage, ask_until_valid,
                           metered, request_seed)
from jaxwrite.chat.ask import MODEL_ERROR
from jaxwrite.common import InputError, RecordJob
from jaxwrite.common.job_meta import record_usage
from jaxwrite.prep.inputs import QueryRecord

# validate(text, record) -> (label, None) when accepted, else (None, reason)
Validator = Callable[[str, QueryRecord], tuple[Any, str | None]]
REASK_MODES = ("same", "fresh")
GENERATOR_ERROR = "generator_error"   # the reject reason of an ask that got an error, not an answer

# The labelling steps' default sampling (criteria generation uses it as is).
LABELLING_SAMPLING = SamplingParams(temperature=0.7, top_p=0.8, max_new_tokens=2048)


@dataclasses.dataclass(frozen=True)
class Labelling:
    """How a labelling step asks its model: one object from the command line down to the loop, written
    whole to the output's `.meta.json` (beside the step's prompt id and model).

    Attributes:
      sampling: how each answer is sampled; every ask gets its own seed (`request_seed(id, attempt)`).
      attempts: answers asked for per record (the first and the re-asks) before it fails.
      reask: after a rejected answer, "same" re-asks in the same conversation naming the problem, "fresh"
        asks afresh with a new seed.
      constrain_json: ask a local engine for schema-constrained JSON (the step's schema).
      batch_size: records asked at once.
      progress: show a progress bar.
    """
    sampling: SamplingParams = LABELLING_SAMPLING
    attempts: int = 3
    reask: str = "same"
    constrain_json: bool = False
    batch_size: int = 8
    progress: bool = True

    def __post_init__(self):
        if self.attempts < 1:
            raise InputError(f"attempts: expected at least 1, got {self.attempts}")
        if self.reask not in REASK_MODES:
            raise InputError(f"reask '{self.reask}': expected one of {', '.join(REASK_MODES)}")
        if self.batch_size < 1:
            raise InputError(f"batch_size: expected at least 1, got {self.batch_size}")


@dataclasses.dataclass(frozen=True)
class LabelAsk:
    """What a labelling step asks and how it reads the answers.

    first_messages: the conversation that asks about one record; validate: (label, None) or (None,
    reason); to_output: the output record of an accepted label (and the answers it took); reask_text:
    the user turn naming each reason (key "default" for the others); json_schema: the answer's schema,
    sent when `Labelling.constrain_json`; desc: the progress bar's name; role: the model's role on the
    command line, naming its usage in the summary and the output's metadata."""
    first_messages: Callable[[QueryRecord], list[dict[str, str]]]
    validate: Validator
    to_output: Callable[[QueryRecord, Any, int], dict[str, Any]]
    reask_text: Mapping[str, str]
    json_schema: dict | None = None
    desc: str = "labelling"
    role: str = "model"


@dataclasses.dataclass
class LabelCounts:
    """What one pass did. `rejects` counts every rejected answer (a record may add several)."""
    written: int = 0
    resumed: int = 0
    failed: int = 0
    fresh_fallbacks: int = 0  # re-asks the generator could not take, asked again in a fresh conversation
    rejects: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failed_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)   # RecordJob.failed_by_kind
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)   # {role: usage} of this pass

    def to_dict(self) -> dict[str, Any]:
        return {"written": self.written, "resumed": self.resumed, "failed": self.failed,
                "failed_by_kind": dict(self.failed_by_kind), "fresh_fallbacks": self.fresh_fallbacks,
                "rejects": dict(sorted(self.rejects.items())), "usage": self.usage}


def run_usage(model: MeteredChatModel, start: Usage, out_path: str | pathlib.Path, role: str) -> dict[str, Any]:
    """{role: what the model's calls cost since `start`}, also appended to `<out_path>.meta.json`'s
    `usage_runs`, so the output's metadata keeps every run's requests, tokens, time and cost."""
    usage = {role: model.usage_dict(model.usage.since(start)) | {"scope": "this run"}}
    record_usage(out_path, usage)
    return usage


def failures_path(out_path: str | pathlib.Path) -> pathlib.Path:
    out = pathlib.Path(out_path)
    return out.with_name(out.stem + ".failures.jsonl")


def label_records(records: Sequence[QueryRecord], model: ChatModel, out_path: str | pathlib.Path,
                  ask: LabelAsk, settings: Labelling = Labelling()) -> LabelCounts:
    """Labels every record not yet in `out_path`; returns the counts of this pass."""
    model = metered(model)
    start = model.usage.copy()
    # Ids compare as strings: 1 and "1" name one query (`load_queries` refuses such a pair).
    job = RecordJob(out_path, "id", desc=ask.desc, failures=failures_path(out_path), progress=settings.progress,
                    id_form=str)
    todo = job.pending(records, id_of=lambda r: r.id, line_of=lambda r: r.line)
    counts = LabelCounts(resumed=job.resumed)
    schema = ask.json_schema if settings.constrain_json else None

    def request(record: QueryRecord, attempt: int) -> ChatRequest:
        return ChatRequest(messages=tuple(ask.first_messages(record)), json_schema=schema,
                           sampling=dataclasses.replace(settings.sampling, seed=request_seed(record.id, attempt)))

    def reask(reason: str) -> str:
        return ask.reask_text.get(reason, ask.reask_text["default"])

    def write(asked: Asked) -> None:
        job.write(ask.to_output(asked.item, asked.value, asked.tries))

    for chunk in job.batches(todo, settings.batch_size):
        asked = ask_until_valid(model, chunk, request, ask.validate, attempts=settings.attempts,
                                reask=reask if settings.reask == "same" else None, on_valid=write)
        for a in asked:
            reasons = [GENERATOR_ERROR if r == MODEL_ERROR else r for r in a.reasons]
            counts.rejects.update(reasons)
            counts.fresh_fallbacks += len(a.reask_errors)
            if a.accepted:
                continue
            # Told apart as the job's summary tells them: the server's own error (permanent or
            # transient) when the last answer was one, else answers that never passed validation.
            error = a.error if a.kind != "unparseable" else f"every answer rejected ({reasons[-1]})"
            job.fail({"id": a.item.id, "line": a.item.line, **a.failure(), "error": error, "reasons": reasons,
                      "reask_errors": a.reask_errors}, error=error, kind=a.kind)
        job.note(failed=job.failed)
    job.close()
    counts.written, counts.failed, counts.failed_by_kind = job.written, job.failed, job.failed_by_kind
    counts.usage = run_usage(model, start, out_path, ask.role)
    return counts
