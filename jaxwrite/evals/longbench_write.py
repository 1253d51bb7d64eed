"""LongBench-Write (THUDM/LongWriter): length score S_l, the quality judge call and its parsing, S_q.

Items have no ids upstream; jaxwrite identifies them by their 1-based line number in the benchmark
file, and response files say `{"index": line_number, "response": str}`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import statistics
from typing import Mapping, Sequence

from jaxwrite.chat import ChatRequest, SamplingParams
from jaxwrite.common.errors import InputError
from jaxwrite.common.jsonl import read_jsonl
from jaxwrite.common.data_dir import benchmark_dir
from jaxwrite.prompts import longbench_write_judge_messages
from jaxwrite.evals.responses import (ResponseAnswers, extract_answers, read_indexed_responses,
                                      read_response_records)

SUBSETS = {"longbench_write": "longbench_write.jsonl", "longbench_write_en": "longbench_write_en.jsonl",
           "longwrite_ruler": "longwrite_ruler.jsonl"}
QUALITY_DIMENSIONS = ("Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth",
                      "Reading Experience")
# Official judge call (GPT-4o-2024-05-13 upstream): temperature 0.5, up to 1,024 tokens, 5 tries.
JUDGE_SAMPLING = SamplingParams(temperature=0.5, top_p=1.0, max_new_tokens=1024)
JUDGE_ATTEMPTS = 5
# What the quality judge must write; a judge mode that cannot (score_logit) is refused with this.
QUALITY_VERDICT = "LongBench-Write's verdict of six 1-5 dimension scores in JSON"
# The paper's length bins (required length) for the per-bin S_l breakdown.
LENGTH_BINS = ((0, 500), (500, 2000), (2000, 4000), (4000, float("inf")))
_FENCE = re.compile(r"```json(.*?)```", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class LongWriteItem:
    index: int  # 1-based line number in the benchmark file
    prompt: str
    type: str
    length: int  # required words (English) or CJK characters (Chinese)


def load_longbench_write(data_dir: str | os.PathLike | None = None,
                         subset: str = "longbench_write") -> list[LongWriteItem]:
    """The items of one file in `<data_dir>/longbench_write/`, in line order."""
    if subset not in SUBSETS:
        raise InputError(f"unknown LongBench-Write subset '{subset}'; expected one of: {', '.join(SUBSETS)}")
    path = str(benchmark_dir(data_dir, "longbench_write") / SUBSETS[subset])
    items = []
    for line, rec in read_jsonl(path, required=("prompt", "type", "length")):
        if not isinstance(rec["length"], int) or isinstance(rec["length"], bool) or rec["length"] <= 0:
            raise InputError("expected a positive integer", path=path, line=line, field="length")
        if not isinstance(rec["prompt"], str):
            raise InputError("expected a string", path=path, line=line, field="prompt")
        items.append(LongWriteItem(len(items) + 1, rec["prompt"], str(rec["type"]), rec["length"]))
    return items


def read_longwrite_responses(path: str | os.PathLike, num_items: int) -> dict[int, str]:
    """{index: response}; indices are 1-based benchmark line numbers, each at most once."""
    return read_indexed_responses(path, range(1, num_items + 1),
                                  f"a 1-based benchmark line number 1..{num_items}")


def read_longwrite_answers(path: str | os.PathLike, num_items: int, mode: str = "auto") -> ResponseAnswers:
    """The response file under an answer-extraction mode, with the checks of `read_longwrite_responses`."""
    records = read_response_records(path, valid=range(1, num_items + 1),
                                    expected=f"a 1-based benchmark line number 1..{num_items}")
    return extract_answers(records, mode)


def length_score(required: float, produced_words: float) -> float:
    """Official S_l for one item (0..100): over-length decays over 3x, under-length over 2x; y = 0 -> 0."""
    if required <= 0:
        raise ValueError(f"required length must be positive, got {required}")
    x, y = float(required), float(produced_words)
    if y <= 0:
        return 0.0
    if y > x:
        return 100.0 * max(0.0, 1.0 - (y / x - 1.0) / 3.0)
    return 100.0 * max(0.0, 1.0 - (x / y - 1.0) / 2.0)


def length_scores_by_bin(required: Sequence[int], scores: Sequence[float]) -> dict[str, float | None]:
    """Mean S_l per paper length bin, keyed like "[500,2000)" (the last bin "[4000,)" is open); None for an
    empty bin."""
    out = {}
    for lo, hi in LENGTH_BINS:
        vals = [s for r, s in zip(required, scores) if lo <= r < hi]
        out[f"[{lo},{hi if hi != float('inf') else ''})"] = statistics.fmean(vals) if vals else None
    return out


def quality_request(prompt: str, response: str, seed: int | None) -> ChatRequest:
    """judge.txt with $INST$ and $RESPONSE$ replaced (plain string replace), as one user message."""
    return ChatRequest(messages=tuple(longbench_write_judge_messages(prompt, response)),
                       sampling=dataclasses.replace(JUDGE_SAMPLING, seed=seed))


def parse_quality_output(text: str) -> dict[str, float] | None:
    """The six dimension scores (numbers in 1..5) or None. JSON is taken from a ```json fence when
    present; jaxwrite also requires each score to be a number in range (upstream only needs the keys)."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    try:
        verdict = json.loads(body.strip(), strict=False)  # judges put raw newlines inside "Analysis"
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(verdict, dict):
        return None
    scores = {}
    for dim in QUALITY_DIMENSIONS:
        value = verdict.get(dim)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 5:
            return None
        scores[dim] = float(value)
    return scores


def quality_scores(verdicts: Sequence[Mapping[str, float]]) -> dict[str, float] | None:
    """Per dimension (mean - 1) x 25 over the parsed items, plus "S_q" = their mean; None when empty."""
    if not verdicts:
        return None
    per_dim = {d: (statistics.fmean(v[d] for v in verdicts) - 1.0) * 25.0 for d in QUALITY_DIMENSIONS}
    return per_dim | {"S_q": statistics.fmean(per_dim.values())}
