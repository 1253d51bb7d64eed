"""Query-specific criteria in the WritingBench schema, written by a generator model.

THE PROMPT IS JAXWRITE'S OWN (id `jaxwrite-criteria-v1`): WritingBench describes its five criteria per
query (name, description, a rubric for the 1-2 / 3-4 / 5-6 / 7-8 / 9-10 bands) but the prompt used to
write them is not reproduced here. The id and this note go to `<output>.meta.json` and to every record.

A generated checklist is accepted only if it has exactly 5 criteria, each an object with exactly the
keys name, criteria_description, 1-2, 3-4, 5-6, 7-8, 9-10 holding non-empty strings, and the names are
distinct within the query. Key order in the generator's answer does not matter; records are written
with the keys in WritingBench's order, because the critic prompt renders each criterion with `str(dict)`.
The answer may be a JSON array, `{"criteria": [...]}`, or an object of five criterion objects (the form
constrained decoding produces, since the engine's JSON-schema support has no arrays).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from jaxwrite.chat import ChatModel
from jaxwrite.common import InputError, read_jsonl
from jaxwrite.common.job_meta import write_or_check_meta
from jaxwrite.evals.writingbench_data import CRITERION_KEYS, NUM_CRITERIA
from jaxwrite.prep.inputs import LoadedQueries, QueryRecord
from jaxwrite.prep.labelling import LabelAsk, LabelCounts, Labelling, label_records
from jaxwrite.prep.model_json import extract_json

PROMPT_ID = "jaxwrite-criteria-v1"
PROMPT_NOTE = ("jaxwrite's own criteria-generation prompt; not WritingBench's (whose prompt is not "
               "reproduced). Criteria made with it are a reimplementation of the WritingBench procedure.")
BANDS = CRITERION_KEYS[2:]

_SYSTEM = (
    "You design evaluation rubrics for writing tasks. Given a user's writing request, you write exactly "
    "five criteria that an expert reviewer would use to judge a response to THIS request: its purpose, "
    "audience, required content, style, format and length. Criteria must be specific to the request, "
    "distinct from one another, and each must describe what a response earns in every score band.")
_USER = (
    "Writing request{context}:\n<request>\n{query}\n</request>\n\n"
    "Answer with only a JSON array of exactly 5 objects, no other text. Each object has these string "
    "fields, all non-empty:\n"
    '- "name": a short, unique name for the criterion\n'
    '- "criteria_description": what the criterion checks and why it matters for this request\n'
    '- "1-2", "3-4", "5-6", "7-8", "9-10": what a response scoring in that band looks like\n'
    "Write the criteria in the language of the request.")

REASK = {
    "invalid_json": "That was not valid JSON. Answer again with only the JSON array of 5 criteria.",
    "empty_output": "The answer was empty. Answer with only the JSON array of 5 criteria.",
    "not_a_list": "Expected a JSON array of 5 criterion objects. Answer again with only that array.",
    "wrong_count": "Expected exactly 5 criteria. Answer again with exactly 5.",
    "not_an_object": "Each criterion must be a JSON object. Answer again.",
    "missing_keys": ("Each criterion needs exactly the fields name, criteria_description, 1-2, 3-4, 5-6, "
                     "7-8, 9-10. Answer again."),
    "unexpected_keys": ("Each criterion must have only the fields name, criteria_description, 1-2, 3-4, "
                        "5-6, 7-8, 9-10. Answer again."),
    "non_string_value": "Every field must be a string. Answer again.",
    "empty_field": "Every field, including each score band, must be non-empty text. Answer again.",
    "duplicate_names": "The 5 criteria must have distinct names. Answer again.",
    "invalid_unicode": "A field held an invalid character escape. Answer again with plain text fields.",
    "default": "The answer did not follow the required format. Answer again with only the JSON array.",
}

_CRITERION_SCHEMA = {"type": "object", "properties": {k: {"type": "string", "minLength": 1} for k in CRITERION_KEYS},
                     "required": list(CRITERION_KEYS)}
# For engines that constrain decoding to a schema: five criteria as an object (no array support there).
CRITERIA_SCHEMA = {"type": "object",
                   "properties": {f"criterion_{i + 1}": _CRITERION_SCHEMA for i in range(NUM_CRITERIA)},
                   "required": [f"criterion_{i + 1}" for i in range(NUM_CRITERIA)]}


def criteria_messages(query: str, domain1: str | None = None, domain2: str | None = None) -> list[dict[str, str]]:
    """[system, user] asking for the five criteria of one query (jaxwrite's own prompt)."""
    domains = " / ".join(d for d in (domain1, domain2) if d)
    context = f" (domain: {domains})" if domains else ""
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _USER.format(context=context, query=query)}]


def is_unicode_text(text: str) -> bool:
    """False for a string holding a lone surrogate: JSON's `\\udcce` escape parses to one, and such a string
    cannot be written back as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_list(value: Any) -> list | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("criteria", "checklist"):
            if isinstance(value.get(key), list) and len(value) == 1:
                return value[key]
        if value and all(isinstance(v, dict) for v in value.values()):
            return list(value.values())
    return None


def validate_checklist(value: Any) -> tuple[list[dict[str, str]] | None, str | None]:
    """(checklist with keys in WritingBench order, None) or (None, reject reason)."""
    items = _as_list(value)
    if items is None:
        return None, "not_a_list"
    if len(items) != NUM_CRITERIA:
        return None, "wrong_count"
    checklist = []
    for item in items:
        if not isinstance(item, dict):
            return None, "not_an_object"
        if set(CRITERION_KEYS) - set(item):
            return None, "missing_keys"
        if set(item) - set(CRITERION_KEYS):
            return None, "unexpected_keys"
        if not all(isinstance(item[k], str) for k in CRITERION_KEYS):
            return None, "non_string_value"
        if not all(item[k].strip() for k in CRITERION_KEYS):
            return None, "empty_field"
        if not all(is_unicode_text(item[k]) for k in CRITERION_KEYS):
            return None, "invalid_unicode"
        checklist.append({k: item[k].strip() for k in CRITERION_KEYS})
    names = [c["name"] for c in checklist]
    if len(set(names)) != len(names):
        return None, "duplicate_names"
    return checklist, None


def parse_criteria_output(text: str) -> tuple[list[dict[str, str]] | None, str | None]:
    """The generator's text -> validated checklist, or the reject reason."""
    value, reason = extract_json(text)
    if reason is not None:
        return None, reason
    return validate_checklist(value)


def generate_criteria(queries: LoadedQueries, generator: ChatModel, out_path: str | os.PathLike,
                      settings: Labelling = Labelling()) -> dict[str, Any]:
    """Writes one WritingBench-schema record per query to `out_path` (resumable); returns the summary."""
    out_path = os.fspath(out_path)
    # Older meta files name the model "generator"; a resume compares the prompt and the model.
    write_or_check_meta(out_path, {"prompt_id": PROMPT_ID, "prompt_note": PROMPT_NOTE, "generator": generator.label,
                                   **dataclasses.asdict(settings)}, ("prompt_id", "generator"))

    def first(record: QueryRecord) -> list[dict[str, str]]:
        return criteria_messages(record.text, record.extra.get("domain1"), record.extra.get("domain2"))

    def output(record: QueryRecord, checklist: list[dict[str, str]], tries: int) -> dict[str, Any]:
        return {"id": record.id, **record.extra, "query": record.text, "checklist": checklist,
                "criteria_prompt": PROMPT_ID, "attempts": tries}

    ask = LabelAsk(first_messages=first, validate=lambda text, _record: parse_criteria_output(text),
                   to_output=output, reask_text=REASK, json_schema=CRITERIA_SCHEMA, desc="criteria",
                   role="generator")
    counts: LabelCounts = label_records(queries.records, generator, out_path, ask, settings)
    return {"step": "criteria", "output": out_path, "generator": generator.label, "prompt_id": PROMPT_ID,
            "queries": len(queries.records) + len(queries.empty_lines),
            "empty_query": len(queries.empty_lines), **counts.to_dict()}


def read_criteria(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    """(line, record) of a criteria file, each checklist re-validated (the file may be hand-edited).

    WritingBench's benchmark files are criteria files as shipped: a record without `id` takes its `index`."""
    path = os.fspath(path)
    out = []
    for line, rec in read_jsonl(path, required=("query", "checklist")):
        if "id" not in rec:
            if "index" not in rec:
                raise InputError("missing required field (or 'index', as WritingBench's files name it)",
                                 path=path, line=line, field="id")
            rec = {"id": rec["index"], **rec}
        checklist, reason = validate_checklist(rec["checklist"])
        if reason is not None or [list(c) for c in rec["checklist"]] != [list(CRITERION_KEYS)] * NUM_CRITERIA:
            raise InputError(f"expected {NUM_CRITERIA} criteria with keys {list(CRITERION_KEYS)} in this order, "
                             f"non-empty and with distinct names ({reason or 'key order'})", path=path,
                             line=line, field="checklist")
        out.append((line, rec))
    return out

