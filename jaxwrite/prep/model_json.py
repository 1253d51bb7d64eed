"""Reading a JSON value out of a model's free text: fenced (```json ... ```) or bare, with one reason
string when it cannot be read, so callers can count rejects by reason."""
from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def extract_json(text: str) -> tuple[Any, str | None]:
    """(value, None) or (None, "empty_output" | "invalid_json").

    Tries, in order: the whole text, the first fenced block, and the span from the first `{` or `[`
    to the last matching closer, because chat models often wrap the JSON in a sentence or a fence.
    """
    if not text.strip():
        return None, "empty_output"
    candidates = [text.strip()]
    fence = _FENCE.search(text)
    if fence:
        candidates.append(fence.group(1).strip())
    # The outermost value starts at whichever opener comes first.
    spans = [(text.find(o), text.rfind(c)) for o, c in (("[", "]"), ("{", "}"))]
    for start, end in sorted(spans):
        if 0 <= start < end:
            candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate), None
        except (json.JSONDecodeError, RecursionError):
            continue
    return None, "invalid_json"
