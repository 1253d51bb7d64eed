"""Long-form writing prompts and their target word ranges, labelled by a model, for GRPO.

LongWriter-Zero keeps only real prompts that call for long-form writing and has a strong model predict
a target range [lower, upper] for each. THE PROMPT IS JAXWRITE'S OWN (id `jaxwrite-longform-v1`; the
paper does not publish one); the id goes to `<labels>.meta.json` and to every labels record.

Validation of the model's answer `{"long_form": bool, "lower": int, "upper": int}` (rejected answers
are re-asked, then recorded as failures):
  long_form must be a boolean; for long-form prompts lower and upper are positive integers,
  lower <= upper, min_words <= lower, upper <= max_words and upper <= max_ratio x lower.
Consistency with an explicit request (`jaxwrite.text.parse_length_request`, whole-text requests only;
a per-part "each 200 words" bounds no total): the request's range is `length_range_for(request)`, the
rule the GRPO prompt loader applies. The predicted range conflicts with it when the two do not overlap.
  on_conflict="explicit" (default): whenever a prompt has an explicit request, its range is used and
      the prediction is kept beside it; conflicts are counted.
  on_conflict="flag": the predicted range is used and conflicting records carry conflict=true.
A prompt the model calls not long-form although it states a whole-text length of at least min_words is
counted as `not_long_form_with_request` (kept out, as the model said, but visible).

Outputs: the labels file (one line per prompt, resumable by id) and the RL prompt file
`{id, prompt, lower, upper}` of the long-form prompts, rebuilt from the labels on every run, which
`jaxwrite.rl.load_rl_prompts` reads.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from jaxwrite.chat import ChatModel, SamplingParams
from jaxwrite.common import InputError, json_line, read_jsonl
from jaxwrite.common.job_meta import write_or_check_meta
from jaxwrite.prep.inputs import LoadedQueries, QueryRecord
from jaxwrite.prep.labelling import LabelAsk, Labelling, label_records
from jaxwrite.prep.model_json import extract_json
from jaxwrite.text import length_range_for, parse_length_request

PROMPT_ID = "jaxwrite-longform-v1"
PROMPT_NOTE = ("jaxwrite's own long-form classification and length-range prompt; LongWriter-Zero does not "
               "publish its prompt.")
ON_CONFLICT = ("explicit", "flag")
# Greedy and short: the answer is one small JSON object.
LONG_FORM_LABELLING = Labelling(sampling=SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=256))

_SYSTEM = (
    "You triage writing requests for training a long-form writing model. Decide whether the user's "
    "request calls for long-form writing: a substantial piece of prose (an essay, story, report, article, "
    "speech, chapter, proposal and the like), typically several hundred words or more. Short answers, "
    "questions of fact, code, math, translation of short text, lists, single poems and chit-chat are "
    "not long-form. For long-form requests, predict the range of the answer's length in words (for "
    "Chinese, in characters) that would best satisfy the request; follow any length the request states.")
_USER = ('Request:\n<request>\n{prompt}\n</request>\n\nAnswer with only a JSON object: '
         '{{"long_form": true or false, "lower": integer, "upper": integer}}. '
         'For a request that is not long-form, use 0 for lower and upper.')
REASK = {
    "invalid_json": "That was not valid JSON. Answer with only the JSON object.",
    "empty_output": "The answer was empty. Answer with only the JSON object.",
    "not_an_object": 'Expected a JSON object {"long_form": ..., "lower": ..., "upper": ...}. Answer again.',
    "bad_long_form": '"long_form" must be true or false. Answer again.',
    "bad_range_type": "For a long-form request, lower and upper must be positive integers. Answer again.",
    "lower_above_upper": "lower must not exceed upper. Answer again.",
    "out_of_bounds": "The range is implausible for a long-form answer. Answer again.",
    "range_too_wide": "The range is too wide; give a tighter range. Answer again.",
    "default": "The answer did not follow the required format. Answer again with only the JSON object.",
}
LABEL_SCHEMA = {"type": "object", "properties": {"long_form": {"type": "boolean"}, "lower": {"type": "integer"},
                                                 "upper": {"type": "integer"}},
                "required": ["long_form", "lower", "upper"]}


@dataclasses.dataclass(frozen=True)
class LengthBounds:
    """Sane target ranges in words (count_words units: CJK characters + English words)."""
    min_words: int = 100
    max_words: int = 32_000
    max_ratio: float = 4.0


def length_label_messages(prompt: str) -> list[dict[str, str]]:
    """[system, user] for one prompt (jaxwrite's own prompt)."""
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _USER.format(prompt=prompt)}]


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def validate_length_label(value: Any, bounds: LengthBounds = LengthBounds()) -> tuple[dict | None, str | None]:
    """({"long_form", "lower", "upper"}, None) or (None, reject reason); lower/upper None if not long-form."""
    if not isinstance(value, dict):
        return None, "not_an_object"
    long_form = value.get("long_form")
    if not isinstance(long_form, bool):
        return None, "bad_long_form"
    if not long_form:
        return {"long_form": False, "lower": None, "upper": None}, None
    lower, upper = value.get("lower"), value.get("upper")
    if not (_positive_int(lower) and _positive_int(upper)):
        return None, "bad_range_type"
    if lower > upper:
        return None, "lower_above_upper"
    if lower < bounds.min_words or upper > bounds.max_words:
        return None, "out_of_bounds"
    if upper > bounds.max_ratio * lower:
        return None, "range_too_wide"
    return {"long_form": True, "lower": lower, "upper": upper}, None


def explicit_range(prompt: str) -> tuple[int, int] | None:
    """The range an explicit whole-text length request implies (GRPO loader's rule), or None."""
    request = parse_length_request(prompt)
    if request is None or request.per_part:
        return None
    lower, upper = length_range_for(request)
    return (lower, upper) if 0 < lower <= upper else None


def resolve_range(prompt: str, label: dict[str, Any], on_conflict: str = "explicit") -> dict[str, Any]:
    """The labels record fields: chosen lower/upper, where they came from, the prediction and conflict."""
    if on_conflict not in ON_CONFLICT:
        raise ValueError(f"on_conflict '{on_conflict}': expected one of {', '.join(ON_CONFLICT)}")
    explicit = explicit_range(prompt)
    fields = {"long_form": label["long_form"], "explicit": list(explicit) if explicit else None}
    if not label["long_form"]:
        return fields | {"predicted": None, "lower": None, "upper": None, "range_source": None, "conflict": False}
    predicted = (label["lower"], label["upper"])
    conflict = explicit is not None and (predicted[1] < explicit[0] or predicted[0] > explicit[1])
    use_explicit = explicit is not None and on_conflict == "explicit"
    lower, upper = explicit if use_explicit else predicted
    return fields | {"predicted": list(predicted), "lower": lower, "upper": upper,
                     "range_source": "explicit_request" if use_explicit else "model", "conflict": conflict}


def _read_labels(labels_path: str) -> list[dict[str, Any]]:
    """The labels written so far; none when no prompt got a valid label yet (the file is not created)."""
    if not os.path.exists(labels_path):
        return []
    return [rec for _, rec in read_jsonl(labels_path, required=("id", "prompt", "long_form", "lower", "upper"))]


def write_rl_prompts(labels_path: str | os.PathLike, rl_path: str | os.PathLike,
                     labels: list[dict[str, Any]] | None = None) -> int:
    """Rebuilds the RL prompt file from the labels (long-form prompts only); returns its line count.
    `labels`: the file's records when the caller has read them already."""
    rl_path = os.fspath(rl_path)
    os.makedirs(os.path.dirname(rl_path) or ".", exist_ok=True)
    count = 0
    with open(rl_path + ".partial", "w", encoding="utf-8") as f:
        for rec in _read_labels(os.fspath(labels_path)) if labels is None else labels:
            if rec["long_form"]:
                f.write(json_line({"id": rec["id"], "prompt": rec["prompt"], "lower": rec["lower"],
                                   "upper": rec["upper"]}) + "\n")
                count += 1
    os.replace(rl_path + ".partial", rl_path)
    return count


def label_long_form(prompts: LoadedQueries, model: ChatModel, labels_path: str | os.PathLike,
                    rl_path: str | os.PathLike, settings: Labelling = LONG_FORM_LABELLING, *,
                    bounds: LengthBounds = LengthBounds(), on_conflict: str = "explicit") -> dict[str, Any]:
    """Labels every prompt not yet in `labels_path`, then rebuilds `rl_path`; returns the summary."""
    labels_path = os.fspath(labels_path)
    if on_conflict not in ON_CONFLICT:
        raise InputError(f"on_conflict: expected one of {', '.join(ON_CONFLICT)}, found {on_conflict!r}")
    meta = {"prompt_id": PROMPT_ID, "prompt_note": PROMPT_NOTE, "model": model.label,
            "bounds": dataclasses.asdict(bounds), "on_conflict": on_conflict, **dataclasses.asdict(settings)}
    write_or_check_meta(labels_path, meta, ("prompt_id", "model", "on_conflict"))

    def validate(text: str, _record: QueryRecord) -> tuple[dict | None, str | None]:
        value, reason = extract_json(text)
        return (None, reason) if reason is not None else validate_length_label(value, bounds)

    def output(record: QueryRecord, label: dict[str, Any], tries: int) -> dict[str, Any]:
        return {"id": record.id, **record.extra, "prompt": record.text,
                **resolve_range(record.text, label, on_conflict), "labels_prompt": PROMPT_ID, "attempts": tries}

    ask = LabelAsk(first_messages=lambda r: length_label_messages(r.text), validate=validate, to_output=output,
                   reask_text=REASK, json_schema=LABEL_SCHEMA, desc="long-form labels", role="labeller")
    counts = label_records(prompts.records, model, labels_path, ask, settings)
    labels = _read_labels(labels_path)
    written = write_rl_prompts(labels_path, rl_path, labels)
    tallies = {"long_form": 0, "not_long_form": 0, "explicit_request_used": 0, "conflicts": 0,
               "not_long_form_with_request": 0}
    for rec in labels:
        tallies["long_form" if rec["long_form"] else "not_long_form"] += 1
        tallies["explicit_request_used"] += rec.get("range_source") == "explicit_request"
        tallies["conflicts"] += bool(rec.get("conflict"))
        explicit = rec.get("explicit")
        tallies["not_long_form_with_request"] += (not rec["long_form"] and explicit is not None
                                                  and explicit[0] >= bounds.min_words)
    return {"step": "long_form", "labels": labels_path, "rl_prompts": os.fspath(rl_path), "model": model.label,
            "prompt_id": PROMPT_ID, "prompts": len(prompts.records) + len(prompts.empty_lines),
            "empty_prompt": len(prompts.empty_lines), **counts.to_dict(), **tallies, "rl_prompts_written": written}
