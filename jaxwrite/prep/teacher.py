"""N responses per query from a teacher model (any chat endpoint or local model), resumable.

Each query goes to the teacher as one user turn with no system prompt, as WritingBench generates
responses; the default sampling is WritingBench's generation setting (temperature 0.7, top_p 0.8,
top_k 20, up to 16,000 new tokens). Protected benchmark queries are excluded before any call, by the
critic-data contamination guard (`data_pipelines.guard_records`): an error by default, or dropped and
counted with `on_overlap="drop"`.

Output: one `{response_id, id, sample, response, finish_reason}` per line, `response_id` = "<id>#<k>".
A call that returns no text goes to `<output stem>.failures.jsonl` and is asked again on a re-run;
empty and truncated (finish_reason "length") responses are kept, as the teacher's output, and counted.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from tqdm import tqdm

from data_pipelines import ContaminationGuard, guard_records
from jaxwrite.common import append_jsonl, read_done_ids
from jaxwrite.evals.judges import ChatRequest, Judge
from jaxwrite.prep.criteria import read_criteria
from jaxwrite.prep.labelling import Sampling, failures_path, request_seed

WRITINGBENCH_GENERATION = Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=16_000)


def response_id(query_id: Any, sample: int) -> str:
    return f"{query_id}#{sample}"


def generate_responses(criteria_path: str | os.PathLike, teacher: Judge, out_path: str | os.PathLike, *,
                       num_samples: int, guard: ContaminationGuard | None, on_overlap: str = "error",
                       allow_overlap: bool = False, sampling: Sampling = WRITINGBENCH_GENERATION,
                       batch_size: int = 8, progress: bool = True) -> dict[str, Any]:
    """Asks the teacher `num_samples` times per query of a criteria file; returns the summary."""
    if num_samples < 1:
        raise ValueError(f"num_samples: expected at least 1, got {num_samples}")
    criteria_path, out_path = os.fspath(criteria_path), os.fspath(out_path)
    records, guard_stats = guard_records(read_criteria(criteria_path), guard, path=criteria_path,
                                         on_overlap=on_overlap, allow_overlap=allow_overlap)
    if guard_stats["dropped"]:
        print(f"warning: {guard_stats['dropped']} queries overlap protected benchmark queries and are excluded",
              file=sys.stderr)
    wanted = [(rec, k) for _, rec in records for k in range(num_samples)]
    done = read_done_ids(out_path, "response_id")
    todo = [(rec, k) for rec, k in wanted if response_id(rec["id"], k) not in done]
    summary = {"step": "responses", "output": out_path, "teacher": teacher.label, "queries": len(records),
               "num_samples": num_samples, "guard": guard_stats, "resumed": len(wanted) - len(todo),
               "written": 0, "failed": 0, "empty": 0, "truncated": 0}
    bar = tqdm(total=len(wanted), initial=summary["resumed"], disable=not progress, file=sys.stderr,
               desc="responses", unit="response")
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        requests = [ChatRequest(messages=({"role": "user", "content": rec["query"]},),
                                temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                                max_tokens=sampling.max_tokens, seed=request_seed(rec["id"], k))
                    for rec, k in chunk]
        for (rec, k), result in zip(chunk, teacher.chat(requests)):
            rid = response_id(rec["id"], k)
            if not result.ok:
                append_jsonl(failures_path(out_path), {"response_id": rid, "id": rec["id"], "sample": k,
                                                       "error": result.error})
                summary["failed"] += 1
            else:
                append_jsonl(out_path, {"response_id": rid, "id": rec["id"], "sample": k,
                                        "response": result.text, "finish_reason": result.finish_reason})
                summary["written"] += 1
                summary["empty"] += not result.text.strip()
                summary["truncated"] += result.finish_reason == "length"
            bar.update(1)
    bar.close()
    return summary
