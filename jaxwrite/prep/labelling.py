"""The loop shared by model-labelling steps (criteria, long-form labels): ask, validate, re-ask with the
reason, write each accepted record as it comes, and count every reject by reason.

Re-asks (`reask`): "same" continues the conversation, naming what was wrong (what a capable chat model
needs); when the generator cannot take that longer conversation (any per-request error, e.g. past a
local model's context), the same attempt is asked again in a fresh conversation with a new seed, and
counted as a `fresh_fallback`. "fresh" always asks afresh with a new seed: for a model too small to
follow a correction, whose earlier answer would only fill its context.

A record whose answers are all rejected within `attempts`, or whose request the server refuses for good
(a permanent error such as a 400: not asked again), goes to `<output stem>.failures.jsonl` with its
reasons, its failure kind (permanent, transient or unparseable, as the job's closing summary counts
them) and last output; it is not written to the output, so a re-run asks again. Records already
in the output (by id) are skipped: re-running resumes.
"""
from __future__ import annotations

import collections
import dataclasses
import glob
import json
import os
import pathlib
import zlib
from typing import Any, Callable, Mapping, Sequence

from jaxwrite.chat import ChatModel, ChatRequest, SamplingParams
from jaxwrite.common import InputError, RecordJob
from jaxwrite.prep.inputs import QueryRecord

# validate(text, record) -> (label, None) when accepted, else (None, reason)
Validator = Callable[[str, QueryRecord], tuple[Any, str | None]]
REASK_MODES = ("same", "fresh")


# The labelling steps' default sampling (criteria generation uses it as is).
LABELLING_SAMPLING = SamplingParams(temperature=0.7, top_p=0.8, max_new_tokens=2048)


def Sampling(temperature: float = LABELLING_SAMPLING.temperature,  # noqa: N802 (kept for users' code)
             top_p: float = LABELLING_SAMPLING.top_p, top_k: int | None = None,
             max_tokens: int = LABELLING_SAMPLING.max_new_tokens) -> SamplingParams:
    """Thin constructor kept for users' code from before labelling took the engine's `SamplingParams`:
    returns one with the labelling defaults (`max_tokens` is its `max_new_tokens`)."""
    return SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=max_tokens)


@dataclasses.dataclass
class LabelCounts:
    """What one pass did. `rejects` counts every rejected answer (a record may add several)."""
    written: int = 0
    resumed: int = 0
    failed: int = 0
    fresh_fallbacks: int = 0  # re-asks the generator could not take, asked again in a fresh conversation
    rejects: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failed_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)   # RecordJob.failed_by_kind

    def to_dict(self) -> dict[str, Any]:
        return {"written": self.written, "resumed": self.resumed, "failed": self.failed,
                "failed_by_kind": dict(self.failed_by_kind), "fresh_fallbacks": self.fresh_fallbacks,
                "rejects": dict(sorted(self.rejects.items()))}


def failures_path(out_path: str | pathlib.Path) -> pathlib.Path:
    out = pathlib.Path(out_path)
    return out.with_name(out.stem + ".failures.jsonl")


def write_or_check_meta(out_path: str, keys: tuple[str, ...], meta: dict[str, Any]) -> None:
    """Writes `<out_path>.meta.json`; refuses to resume an existing output made with other `keys` values,
    because one file would then mix labels from two models or prompts."""
    meta_path = out_path + ".meta.json"
    # The output exists, or parts of it that several processes wrote (common.record_job.part_path).
    started = os.path.exists(out_path) or glob.glob(glob.escape(out_path.removesuffix(".gz")) + ".part-*")
    if os.path.exists(meta_path) and started:
        with open(meta_path, encoding="utf-8") as f:
            old = json.load(f)
        changed = [k for k in keys if old.get(k) != meta[k]]
        if changed:
            raise InputError(f"expected the settings of the existing output ({', '.join(changed)} differ: "
                             f"{ {k: old.get(k) for k in changed} }); use a new output path", path=meta_path)
    os.makedirs(os.path.dirname(meta_path) or ".", exist_ok=True)
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)


def request_seed(*parts: Any) -> int:
    """A reproducible sampling seed per (record, attempt, ...), so re-asks differ and re-runs repeat."""
    return zlib.crc32(":".join(map(str, parts)).encode()) & 0x7FFFFFFF


def label_records(records: Sequence[QueryRecord], model: ChatModel, out_path: str | pathlib.Path, *,
                  first_messages: Callable[[QueryRecord], list[dict[str, str]]], validate: Validator,
                  to_output: Callable[[QueryRecord, Any, int], dict[str, Any]],
                  reask_text: Mapping[str, str], sampling: SamplingParams, json_schema: dict | None = None,
                  attempts: int = 3, reask: str = "same", batch_size: int = 8, progress: bool = True,
                  desc: str = "labelling") -> LabelCounts:
    """Labels every record not yet in `out_path`; returns the counts of this pass."""
    if attempts < 1:
        raise ValueError(f"attempts: expected at least 1, got {attempts}")
    if reask not in REASK_MODES:
        raise ValueError(f"reask '{reask}': expected one of {', '.join(REASK_MODES)}")
    # Ids compare as strings: 1 and "1" name one query (`load_queries` refuses such a pair).
    job = RecordJob(out_path, "id", desc=desc, failures=failures_path(out_path), progress=progress, id_form=str)
    todo = job.pending(records, id_of=lambda r: r.id, line_of=lambda r: r.line)
    counts = LabelCounts(resumed=job.resumed)

    def ask(conversation: list[dict[str, str]], seed: int) -> ChatRequest:
        return ChatRequest(messages=tuple(conversation), sampling=dataclasses.replace(sampling, seed=seed),
                           json_schema=json_schema)

    for chunk in job.batches(todo, batch_size):
        firsts = {r.id: first_messages(r) for r in chunk}
        conversations = dict(firsts)
        reasons: dict[Any, list[str]] = {r.id: [] for r in chunk}
        reask_errors: dict[Any, list[str]] = {r.id: [] for r in chunk}
        last_result: dict[Any, Any] = {}   # each record's latest answer (or error)
        given_up: list[QueryRecord] = []   # a permanent error: asking again cannot fix it
        pending = list(chunk)
        for attempt in range(attempts):
            if not pending:
                break
            results = model.chat([ask(conversations[r.id], request_seed(r.id, attempt)) for r in pending])
            # A re-ask the generator could not take: the same attempt again, in a fresh conversation.
            retry = [i for i, (r, res) in enumerate(zip(pending, results))
                     if not res.ok and conversations[r.id] is not firsts[r.id]]
            for i in retry:
                record = pending[i]
                reask_errors[record.id].append((results[i].error or "")[:300])
                conversations[record.id] = firsts[record.id]
            if retry:
                counts.fresh_fallbacks += len(retry)
                fresh = model.chat([ask(conversations[pending[i].id], request_seed(pending[i].id, attempt, "fresh"))
                                    for i in retry])
                for i, result in zip(retry, fresh):
                    results[i] = result
            still = []
            for record, result in zip(pending, results):
                last_result[record.id] = result
                if not result.ok:
                    label, reason = None, "generator_error"
                else:
                    label, reason = validate(result.text, record)
                if reason is None:
                    job.write(to_output(record, label, attempt + 1))
                    continue
                counts.rejects[reason] += 1
                reasons[record.id].append(reason)
                if result.permanent:
                    given_up.append(record)
                    continue
                still.append(record)
                if result.ok and reask == "same":  # re-ask in the same conversation, naming what was wrong
                    conversations[record.id] = conversations[record.id] + [
                        {"role": "assistant", "content": result.text},
                        {"role": "user", "content": reask_text.get(reason, reask_text["default"])}]
            pending = still
        for record in given_up + pending:
            # Told apart as the job's summary tells them: the server's own error (permanent or
            # transient) when the last answer was one, else answers that never passed validation.
            result = last_result[record.id]
            kind = result.failure_kind
            error = result.error if not result.ok else f"every answer rejected ({reasons[record.id][-1]})"
            job.fail({"id": record.id, "line": record.line, "attempts": len(reasons[record.id]),
                      "reasons": reasons[record.id], "kind": kind, "reask_errors": reask_errors[record.id],
                      "last_output": (result.text if result.ok else result.error or "")[:2000]},
                     error=error, kind=kind)
        job.note(failed=job.failed)
    job.close()
    counts.written, counts.failed, counts.failed_by_kind = job.written, job.failed, job.failed_by_kind
    return counts
