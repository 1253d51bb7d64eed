"""N responses per query from a teacher model (any chat endpoint or local model), resumable.

Each query goes to the teacher as one user turn with no system prompt, as WritingBench generates
responses; the default sampling is WritingBench's generation setting (temperature 0.7, top_p 0.8,
top_k 20, up to 16,000 new tokens). Protected benchmark queries are excluded before any call, by the
critic-data contamination guard (`data_pipelines.guard_records`): an error by default, or dropped and
counted with `on_overlap="drop"` (`jaxwrite prep responses --on-overlap drop`).

Output: one `{response_id, id, sample, response, finish_reason}` per line, `response_id` = "<id>#<k>".
A call that returns no text goes to `<output stem>.failures.jsonl` and is asked again on a re-run;
the run reports such failures by kind: a permanent error (a 4xx, a prompt too long for the teacher's
context) with the server's message, as one a re-run does not fix; transient ones (timeouts, 5xx) as
retryable by a re-run. Empty and truncated (finish_reason "length") responses are kept, as the
teacher's output, and counted.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from data_pipelines import ContaminationGuard, guard_records
from jaxwrite.chat import ChatModel, ChatRequest, SamplingParams, metered, request_seed
from jaxwrite.common import RecordJob
from jaxwrite.prep.criteria import read_criteria
from jaxwrite.prep.labelling import failures_path, run_usage

WRITINGBENCH_GENERATION = SamplingParams(temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=16_000)


def response_id(query_id: Any, sample: int) -> str:
    return f"{query_id}#{sample}"


def generate_responses(criteria_path: str | os.PathLike, teacher: ChatModel, out_path: str | os.PathLike, *,
                       num_samples: int, guard: ContaminationGuard | None, on_overlap: str = "error",
                       allow_overlap: bool = False, sampling: SamplingParams = WRITINGBENCH_GENERATION,
                       batch_size: int = 8, progress: bool = True) -> dict[str, Any]:
    """Asks the teacher `num_samples` times per query of a criteria file; returns the summary."""
    if num_samples < 1:
        raise ValueError(f"num_samples: expected at least 1, got {num_samples}")
    criteria_path, out_path = os.fspath(criteria_path), os.fspath(out_path)
    teacher = metered(teacher)
    start = teacher.usage.copy()
    records, guard_stats = guard_records(read_criteria(criteria_path), guard, path=criteria_path,
                                         on_overlap=on_overlap, allow_overlap=allow_overlap)
    if guard_stats["dropped"]:
        print(f"warning: {guard_stats['dropped']} queries overlap protected benchmark queries and are excluded",
              file=sys.stderr)
    wanted = [(line, rec, k) for line, rec in records for k in range(num_samples)]
    job = RecordJob(out_path, "response_id", desc="responses", unit="response", failures=failures_path(out_path),
                    progress=progress)
    todo = job.pending(wanted, id_of=lambda item: response_id(item[1]["id"], item[2]), source=criteria_path,
                       line_of=lambda item: item[0])
    summary = {"step": "responses", "output": out_path, "teacher": teacher.label, "queries": len(records),
               "num_samples": num_samples, "guard": guard_stats, "resumed": job.resumed,
               "written": 0, "failed": 0, "empty": 0, "truncated": 0}
    for chunk in job.batches(todo, batch_size):
        requests = [ChatRequest(messages=({"role": "user", "content": rec["query"]},),
                                sampling=dataclasses.replace(sampling, seed=request_seed(rec["id"], k)))
                    for _, rec, k in chunk]
        for (_, rec, k), result in zip(chunk, teacher.chat(requests)):
            rid = response_id(rec["id"], k)
            if not result.ok:
                job.fail({"response_id": rid, "id": rec["id"], "sample": k, "error": result.error,
                          "permanent": result.permanent, "kind": result.failure_kind},
                         error=result.error, kind=result.failure_kind)
            else:
                job.write({"response_id": rid, "id": rec["id"], "sample": k,
                           "response": result.text, "finish_reason": result.finish_reason})
                summary["empty"] += not result.text.strip()
                summary["truncated"] += result.finish_reason == "length"
    job.close()
    return summary | {"written": job.written, "failed": job.failed, "failed_by_kind": job.failed_by_kind,
                      "usage": run_usage(teacher, start, out_path, "teacher")}
