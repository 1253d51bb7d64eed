"""Response files of the model under test: jsonl lines {"index": int, "response": str}."""
from __future__ import annotations

import os
from typing import Container

from jaxwrite.common import InputError, read_jsonl


def read_indexed_responses(path: str | os.PathLike, valid: Container[int], expected: str) -> dict[int, str]:
    """{index: response}; file:line errors for an index not in `valid` (described by `expected`), a repeated
    index, or a response that is not a string."""
    path = os.fspath(path)
    responses: dict[int, str] = {}
    for line, rec in read_jsonl(path, required=("index", "response")):
        index = rec["index"]
        if not isinstance(index, int) or isinstance(index, bool) or index not in valid:
            raise InputError(f"expected {expected}, found {index!r}", path=path, line=line, field="index")
        if index in responses:
            raise InputError(f"expected each index once, {index} repeats", path=path, line=line, field="index")
        if not isinstance(rec["response"], str):
            raise InputError("expected a string", path=path, line=line, field="response")
        responses[index] = rec["response"]
    return responses
