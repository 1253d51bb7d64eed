"""Response files of the model under test: jsonl lines {"index": int, "response": str}, and what of
each response is scored (one answer-extraction rule for every scorer and the arena).

Lines written by `jaxwrite generate --think-answer` also carry `raw_response` (the full text),
`plan`, `well_formed` and `problems`; their `response` is already the answer, so they are taken as
extracted and never parsed twice.
"""
from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any, Container, Iterable, Mapping

from jaxwrite.common import InputError, read_jsonl
from jaxwrite.text import (ANSWER_EXTRACTION_MODES, ExtractedAnswer, extract_answer,
                           resolve_answer_extraction)

# How each applied mode treats a response, for score-file metadata and reports.
EXTRACTION_RULES = {
    "think_answer": ("only the <answer> block is judged and counted (the <think> plan is kept apart); "
                     "a response without exactly one <think> then one non-empty <answer> is malformed "
                     "and not scored"),
    "official_strip": "removed everything through the first '</think>\\n\\n' (official current code)",
    "none": "none (sent as is)",
}


def read_indexed_responses(path: str | os.PathLike, valid: Container[int], expected: str) -> dict[int, str]:
    """{index: response}; file:line errors for an index not in `valid` (described by `expected`), a repeated
    index, or a response that is not a string."""
    records = read_response_records(path, valid=valid, expected=expected)
    return {index: rec["response"] for index, rec in records.items()}


def answer_extraction_mode(answer_extraction: str | None) -> str:
    """The requested mode, checked: one of `jaxwrite.text.ANSWER_EXTRACTION_MODES`; None means "auto"."""
    if answer_extraction is None:
        return "auto"
    if answer_extraction not in ANSWER_EXTRACTION_MODES:
        raise InputError(f"answer extraction '{answer_extraction}': expected one of "
                         f"{', '.join(ANSWER_EXTRACTION_MODES)}")
    return answer_extraction


@dataclasses.dataclass
class ResponseAnswers:
    """One response file under an answer-extraction mode: `mode` as asked, `applied` after "auto"
    was resolved over the whole file, and what is scored of each response."""
    mode: str
    applied: str
    answers: dict[Any, ExtractedAnswer]

    def scorable(self, keys: Iterable | None = None) -> dict[Any, str]:
        """{key: text to judge and count}, malformed responses left out."""
        return {k: a.text for k, a in self._items(keys) if not a.malformed}

    def malformed(self, keys: Iterable | None = None) -> dict[Any, tuple[str, ...]]:
        """{key: problems} for the malformed think/answer responses."""
        return {k: a.problems for k, a in self._items(keys) if a.malformed}

    def summary(self, keys: Iterable | None = None) -> dict[str, Any]:
        """Counts over `keys` (default all) for score-file metadata and reports."""
        items = self._items(keys)
        sources = collections.Counter(a.source for _, a in items)
        reasons = collections.Counter(p for _, a in items if a.malformed for p in a.problems)
        return {"mode": self.mode, "applied": self.applied, "rule": EXTRACTION_RULES[self.applied],
                "answers": sources["answer"], "stripped": sources["stripped"], "raw": sources["raw"],
                "malformed": sources["malformed"], "malformed_reasons": dict(reasons.most_common()),
                "malformed_items": [{"id": k, "problems": list(a.problems)} for k, a in items if a.malformed]}

    def _items(self, keys: Iterable | None) -> list[tuple[Any, ExtractedAnswer]]:
        if keys is None:
            return list(self.answers.items())
        return [(k, self.answers[k]) for k in keys if k in self.answers]


def read_response_records(path: str | os.PathLike, *, key: str = "index", valid: Container | None = None,
                          expected: str = "", repeated: str | None = None) -> dict[Any, dict]:
    """{id: record}; file:line errors for an id outside `valid` (described by `expected`), a repeated id
    (`repeated` replaces the default message), a non-string response, or bad think/answer fields."""
    path = os.fspath(path)
    records: dict[Any, dict] = {}
    for line, rec in read_jsonl(path, required=(key, "response")):
        rid = rec[key]
        if valid is not None and (not isinstance(rid, int) or isinstance(rid, bool) or rid not in valid):
            raise InputError(f"expected {expected}, found {rid!r}", path=path, line=line, field=key)
        if rid in records:
            raise InputError(repeated or f"expected each {key} once, {rid!r} repeats", path=path, line=line,
                             field=key)
        _check_fields(rec, path, line)
        records[rid] = rec
    return records


def _check_fields(rec: dict, path: str, line: int) -> None:
    if not isinstance(rec["response"], str):
        raise InputError("expected a string", path=path, line=line, field="response")
    if "raw_response" not in rec:
        return
    checks = {"raw_response": isinstance(rec["raw_response"], str),
              "well_formed": isinstance(rec.get("well_formed"), bool),
              "plan": rec.get("plan") is None or isinstance(rec["plan"], str),
              "problems": isinstance(rec.get("problems", []), list)
              and all(isinstance(p, str) for p in rec.get("problems", []))}
    expect = {"raw_response": "a string", "well_formed": "true or false (a think/answer record)",
              "plan": "a string or null", "problems": "a list of strings"}
    for field, ok in checks.items():
        if not ok:
            raise InputError(f"expected {expect[field]}", path=path, line=line, field=field)


def extract_answers(records: Mapping[Any, dict], mode: str = "auto") -> ResponseAnswers:
    """Applies the answer-extraction rule to every record (see `jaxwrite.text.extract_answer`)."""
    texts = [rec.get("raw_response", rec["response"]) for rec in records.values()]
    applied = resolve_answer_extraction(mode, texts,
                                        think_answer_output=any("raw_response" in r for r in records.values()))
    return ResponseAnswers(mode, applied, {k: _extract(rec, applied) for k, rec in records.items()})


def _extract(rec: dict, applied: str) -> ExtractedAnswer:
    if "raw_response" not in rec:
        return extract_answer(rec["response"], applied)
    # Written by `generate --think-answer`: already split, with the stop it actually met.
    raw = rec["raw_response"]
    if applied == "none":
        return ExtractedAnswer(raw, None, "raw")
    if applied == "official_strip":
        return extract_answer(raw, "official_strip")
    if rec["well_formed"]:
        return ExtractedAnswer(rec["response"], rec.get("plan"), "answer")
    return ExtractedAnswer(None, rec.get("plan"), "malformed",
                           tuple(rec.get("problems") or ["marked not well formed by generate"]))


def read_answers(path: str | os.PathLike, mode: str = "auto", **kwargs) -> ResponseAnswers:
    """`read_response_records` (same keyword arguments) then `extract_answers`."""
    return extract_answers(read_response_records(path, **kwargs), mode)
