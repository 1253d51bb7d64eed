"""The JSON-schema keywords the DFA compiler knows, and the one check of their values: a keyword whose
value has the wrong type or range (`minProperties: "x"`, `type: [["x"]]`, `maxLength: -1`) is refused
with SchemaError naming the keyword and what it expects, before any compiling, so a malformed schema
is a 400 and never a TypeError deep inside the compiler."""
from __future__ import annotations

import json
import math
from typing import Any, Callable

from jaxwrite.infer.byte_automaton import SchemaError

MAX_BOUND_DIGITS = 30   # digits of a numeric bound (minimum, maximum, ...) the compiler takes exactly

ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
               "readOnly", "writeOnly", "$defs", "definitions"}
COMMON = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"}
BY_TYPE = {
    "string": {"minLength", "maxLength"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "object": {"properties", "required", "additionalProperties", "minProperties", "maxProperties"},
    "array": {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"},
    "boolean": set(), "null": set(),
}
KNOWN = ANNOTATIONS | COMMON | set().union(*BY_TYPE.values())


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _schema(v) -> bool:
    return isinstance(v, (bool, dict))


def _type(v) -> bool:
    names = v if isinstance(v, list) else [v]
    return bool(names) and all(isinstance(n, str) and n in BY_TYPE for n in names) and len(set(names)) == len(names)


def _json(v) -> bool:
    """A JSON value the output can spell (no NaN or Infinity, which Python's parser lets through)."""
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(_json(x) for x in v)
    if isinstance(v, dict):
        return all(_json(x) for x in v.values())
    return True


_COUNT = (_count, "a non-negative integer")
_NUMBER = (_number, "a finite number")
EXPECTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (_type, f"one of {', '.join(BY_TYPE)} or a non-empty list of distinct ones"),
    "enum": (lambda v: isinstance(v, list) and bool(v) and _json(v), "a non-empty array of JSON values"),
    "const": (_json, "a JSON value (no NaN or Infinity)"),
    "anyOf": (lambda v: isinstance(v, list) and bool(v), "a non-empty array of schemas"),
    "oneOf": (lambda v: isinstance(v, list) and bool(v), "a non-empty array of schemas"),
    "allOf": (lambda v: isinstance(v, list) and bool(v), "a non-empty array of schemas"),
    "$ref": (lambda v: isinstance(v, str), "a string (#/$defs/...)"),
    "$defs": (lambda v: isinstance(v, dict), "an object of named schemas"),
    "definitions": (lambda v: isinstance(v, dict), "an object of named schemas"),
    "minLength": _COUNT, "maxLength": _COUNT, "minProperties": _COUNT, "maxProperties": _COUNT,
    "minItems": _COUNT, "maxItems": _COUNT,
    "minimum": _NUMBER, "maximum": _NUMBER, "exclusiveMinimum": _NUMBER, "exclusiveMaximum": _NUMBER,
    "multipleOf": (lambda v: _number(v) and v > 0, "a number greater than 0"),
    "properties": (lambda v: isinstance(v, dict), "an object mapping property names to schemas"),
    "required": (lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v) and len(set(v)) == len(v),
                 "an array of distinct property names (strings)"),
    "additionalProperties": (_schema, "a schema (an object or a boolean)"),
    "items": (_schema, "a schema (an object or a boolean; a list of schemas is prefixItems in draft 2020-12)"),
    "prefixItems": (lambda v: isinstance(v, list), "an array of schemas"),
    "uniqueItems": (lambda v: isinstance(v, bool), "a boolean"),
}


def check_keywords(schema: dict, where: str) -> None:
    """Refuse `schema` (one level: its sub-schemas are checked as the compiler reaches them) if it has
    a keyword the compiler does not know or a keyword value of the wrong type or range."""
    unknown = sorted(k for k in schema if k not in KNOWN)
    if unknown:
        raise SchemaError(f"{where}: keyword '{unknown[0]}' is not supported (it would be ignored and the "
                          f"output could violate it)", "unsupported_keyword")
    for key, value in schema.items():
        if key not in EXPECTED:
            continue
        ok, expected = EXPECTED[key]
        if key.startswith("exclusive") and isinstance(value, bool):
            raise SchemaError(f"{where}.{key}: expected a number (the draft-4 boolean form is not supported)",
                              "invalid_schema")
        if not ok(value):
            raise SchemaError(f"{where}.{key}: expected {expected}, got {_show(value)}", "invalid_schema")
        if key in BY_TYPE["number"] and abs(value) >= 10 ** MAX_BOUND_DIGITS:   # a bound, a number (checked above)
            raise SchemaError(f"{where}.{key}: {_show(value)} is beyond the bounds this server supports "
                              f"(magnitudes below 10^{MAX_BOUND_DIGITS})", "unsupported_schema")


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
