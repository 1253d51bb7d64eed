"""Constrained decoding honest and bounded (issue 17 item 2): every keyword is honoured (the output
satisfies it) or refused naming it; compilation has a state and a time budget; the compiled-schema
cache is an LRU bounded in bytes; a cached schema (or refusal) never waits on the compile lock."""
import json
import threading

import pytest

from jaxwrite.infer import (Budget, ConstraintLimits, ConstraintSet, GenerationRequest, SamplingParams, SchemaError,
                            compile_schema)
from test_infer_support import engine, tokenizer

HONOURED = [   # (schema, accepted texts, rejected texts): the issue's broken five first
    ({"type": "integer", "minimum": 1, "maximum": 100000}, ["1", "100000", "99999"],
     ["0", "100001", "708360871881385", "-787", "01"]),
    ({"type": "integer", "minimum": 5}, ["5", "999999999999999"], ["4", "-5", "1000000000000000"]),
    ({"type": "integer", "exclusiveMaximum": -3}, ["-4", "-999"], ["-3", "0", "7"]),
    ({"type": "string", "maxLength": 3}, ['"abc"', '""', '"é中\\n"'], ['"abcd"', '"\\ud83d"']),
    ({"type": "string", "minLength": 2, "maxLength": 4}, ['"ab"', '"abcd"'], ['"a"', '"abcde"']),
    ({"type": "number", "minimum": 0, "maximum": 1}, ["0", "0.5", "1", "1.000"], ["1.5", "-0.1", "2", "-0"]),
    ({"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1}, ["-0.5", "0", "0.999999"],
     ["-1", "1", "-1.0", "1.0"]),
    ({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2}, ["[true]", "[true, false]"],
     ["[]", "[true, true, true]"]),
    ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}, "required": ["a"],
      "additionalProperties": False}, ['{"a": null}', '{"a": "x"}'], ['{}', '{"a": 1}']),
    ({"anyOf": [{"type": "integer", "maximum": 3}, {"const": "many"}]}, ["3", '"many"'], ["4", '"few"']),
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, ["5", '"x"'], ["true"]),
    ({"enum": [1, "two", [3]], "type": "integer"}, ["1"], ['"two"', "[3]"]),
    ({"$defs": {"S": {"type": "integer", "minimum": 0, "maximum": 9}}, "type": "object",
      "properties": {"s": {"$ref": "#/$defs/S"}}}, ['{"s": 9}'], ['{"s": 10}']),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1}, ['{}', '{"k": 1}'],
     ['{"k": 1, "j": 2}', '{"k": "v"}']),
]


@pytest.mark.parametrize("schema,good,bad", HONOURED, ids=[json.dumps(h[0])[:60] for h in HONOURED])
def test_keywords_are_honoured_exactly(schema, good, bad):
    dfa = compile_schema(schema)
    assert all(dfa.accepts(t.encode()) for t in good), good
    assert not any(dfa.accepts(t.encode()) for t in bad), bad


@pytest.mark.parametrize("schema,keyword", [
    ({"type": "string", "pattern": "^a+$"}, "pattern"), ({"type": "string", "format": "date-time"}, "format"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf"), ({"not": {"type": "null"}}, "not"),
    ({"type": "object", "patternProperties": {"a": {}}}, "patternProperties"),
    ({"if": {}, "then": {}}, "if"), ({"type": "array", "uniqueItems": True}, "uniqueItems"),
    ({"type": "array", "contains": {"type": "integer"}}, "contains"),
    ({"type": "number", "minimum": 0.5}, "minimum"), ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "oneOf"),
    ({"$ref": "#"}, "recursive"), ({"allOf": [{"type": "integer"}, {"minimum": 1}]}, "allOf"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "required"),
])
def test_everything_else_is_refused_naming_the_keyword(schema, keyword):
    with pytest.raises(SchemaError, match=keyword) as err:
        compile_schema(schema)
    assert err.value.status == 400


@pytest.mark.parametrize("schema,keyword,expected", [
    ({"type": "object", "minProperties": "x"}, "minProperties", "non-negative integer"),
    ({"type": "object", "properties": {"a": {}}, "maxProperties": -1}, "maxProperties", "non-negative integer"),
    ({"type": "object", "properties": {"a": {}}, "minProperties": True}, "minProperties", "non-negative integer"),
    ({"type": [["x"]]}, "type", "one of string"), ({"type": {"a": 1}}, "type", "one of string"),
    ({"type": []}, "type", "non-empty list"),
    ({"type": "object", "properties": {"a": {}}, "required": [["a"]]}, "required", "property names"),
    ({"type": "object", "properties": {"a": {}}, "required": "a"}, "required", "array"),
    ({"type": "string", "maxLength": -1}, "maxLength", "non-negative integer"),
    ({"type": "string", "minLength": 1.5}, "minLength", "non-negative integer"),
    ({"enum": 5}, "enum", "non-empty array"), ({"enum": []}, "enum", "non-empty array"),
    ({"const": float("nan")}, "const", "no NaN"), ({"enum": [1, float("inf")]}, "enum", "JSON values"),
    ({"type": "object", "properties": []}, "properties", "object mapping"),
    ({"type": "object", "additionalProperties": 5}, "additionalProperties", "a schema"),
    ({"type": "array", "items": [{}]}, "items", "prefixItems"), ({"type": "array", "prefixItems": {}}, "prefixItems",
                                                                 "array of schemas"),
    ({"type": "array", "minItems": "1"}, "minItems", "non-negative integer"),
    ({"type": "array", "uniqueItems": "no"}, "uniqueItems", "a boolean"),
    ({"type": "integer", "minimum": "1"}, "minimum", "finite number"),
    ({"type": "integer", "maximum": float("inf")}, "maximum", "finite number"),
    ({"type": "integer", "exclusiveMinimum": True}, "exclusiveMinimum", "draft-4 boolean"),
    ({"type": "integer", "multipleOf": 0}, "multipleOf", "greater than 0"),
    ({"anyOf": {}}, "anyOf", "non-empty array"), ({"oneOf": []}, "oneOf", "non-empty array"),
    ({"allOf": 5}, "allOf", "non-empty array"), ({"$ref": 5}, "\\$ref", "a string"),
    ({"$defs": [], "type": "integer"}, "\\$defs", "named schemas"),
    ({"type": "object", "properties": {"a": {"type": "string", "maxLength": "3"}}}, "properties.a.maxLength",
     "non-negative integer"),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 3, "maxProperties": 1},
     "minProperties 3 exceeds maxProperties", ""),
])
def test_keyword_values_of_the_wrong_type_are_refused_naming_the_keyword(schema, keyword, expected):
    """A malformed keyword value is a SchemaError (the server's 400) naming the keyword and what it
    expects, never a TypeError from inside the compiler (the server's 500)."""
    with pytest.raises(SchemaError, match=f"{keyword}.*{expected}") as err:
        compile_schema(schema)
    assert err.value.status == 400


@pytest.mark.parametrize("schema,good,bad", [
    ({"type": "integer", "minimum": 10 ** 16}, [10 ** 16, 10 ** 16 + 1, 10 ** 18 - 1], [10 ** 16 - 1, 0, -5]),
    ({"type": "integer", "minimum": 10 ** 16, "maximum": 10 ** 16 + 5}, [10 ** 16, 10 ** 16 + 5],
     [10 ** 16 - 1, 10 ** 16 + 6]),
    ({"type": "integer", "exclusiveMaximum": -10 ** 16}, [-10 ** 16 - 1, -10 ** 17], [-10 ** 16, 0]),
    ({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991},   # zod's safe integers
     [-9007199254740991, 0, 9007199254740991], [-9007199254740992, 9007199254740992]),
    ({"type": "integer", "minimum": 1e20}, [10 ** 20], [10 ** 20 - 1]),
    ({"type": "number", "exclusiveMinimum": 10 ** 16}, ["10000000000000000.5", 10 ** 16 + 1],
     [10 ** 16, "9999999999999999.9"]),
    ({"type": "integer", "maximum": 10 ** 30 - 1, "minimum": 10 ** 30 - 2}, [10 ** 30 - 1, 10 ** 30 - 2],
     [10 ** 30, 10 ** 30 - 3]),
])
def test_bounds_beyond_15_digits_are_honoured_exactly(schema, good, bad):
    dfa = compile_schema(schema)
    assert all(dfa.accepts(str(t).encode()) for t in good), good
    assert not any(dfa.accepts(str(t).encode()) for t in bad), bad


@pytest.mark.parametrize("bound", [10 ** 30, -1e40, 1e300])
def test_bounds_past_the_supported_magnitude_are_refused_as_such(bound):
    with pytest.raises(SchemaError, match="beyond the bounds this server supports") as err:
        compile_schema({"type": "integer", "minimum": bound})
    assert err.value.status == 400 and "no integer lies" not in str(err.value)


def test_generated_values_obey_the_bounds():
    """Sampled hot (temperature 3) from a random model, every value still satisfies the schema."""
    schema = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 100000}, "s": {"type": "string", "maxLength": 3},
        "x": {"type": "number", "minimum": -2, "exclusiveMaximum": 2},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}}}
    prompt = tokenizer().encode("the judge")
    requests = [GenerationRequest(prompt, SamplingParams(temperature=3.0, max_new_tokens=48, seed=s), schema)
                for s in range(8)]
    for (c,) in engine().generate(requests):
        value = json.loads(c.text)
        assert 1 <= value["n"] <= 100000 and len(value["s"]) <= 3 and -2 <= value["x"] < 2
        assert len(value["tags"]) <= 2 and set(value["tags"]) <= {"a", "b"}


def test_state_and_time_budgets_refuse_with_schema_too_complex():
    with pytest.raises(SchemaError, match="more than 100 automaton states") as err:
        compile_schema({"const": "x" * 500}, Budget(max_states=100))
    assert err.value.code == "schema_too_complex"
    with pytest.raises(SchemaError, match="compile time budget") as err:
        compile_schema({"type": "string", "maxLength": 5000}, Budget(seconds=1e-9))
    assert err.value.code == "schema_too_complex"
    cs = ConstraintSet(tokenizer(), tokenizer().vocab_size, [2], ConstraintLimits(max_table_bytes=1600 * 50))
    assert cs.max_states == 64                           # the table budget bounds the states: 80 kB / (4 B x 400)
    with pytest.raises(SchemaError, match="schema_too_complex|automaton states"):
        cs.compile({"const": "x" * 100})


def _schemas(n):
    return [{"type": "object", "properties": {f"k{i}": {"type": "integer", "minimum": 0, "maximum": 99}}}
            for i in range(n)]


def test_cache_is_an_lru_bounded_in_bytes():
    tok = tokenizer()
    one = ConstraintSet(tok, tok.vocab_size, [2]).compile(_schemas(1)[0]).nbytes
    cs = ConstraintSet(tok, tok.vocab_size, [2], ConstraintLimits(cache_bytes=int(one * 2.5)))
    for s in _schemas(6):
        cs.compile(s)
    assert cs.cached_bytes <= int(one * 2.5) and len(cs._cache) == 2 and cs.misses == 6
    cs.compile(_schemas(6)[-1])                           # the newest is still there
    assert cs.hits == 1
    cs.compile(_schemas(6)[0])                            # the oldest was evicted: compiled again
    assert cs.misses == 7


def test_cached_schemas_and_refusals_never_wait_on_the_compile_lock():
    tok = tokenizer()
    cs = ConstraintSet(tok, tok.vocab_size, [2])
    cached, refused = _schemas(1)[0], {"type": "string", "pattern": "x"}
    cs.compile(cached)
    with pytest.raises(SchemaError):
        cs.compile(refused)
    got = []

    def lookups():
        got.append(cs.compile(cached) is not None)
        try:
            cs.compile(refused)
        except SchemaError as err:
            got.append("pattern" in str(err))

    with cs._compile_lock:                                # another request compiling, for as long as we like
        worker = threading.Thread(target=lookups)
        worker.start()
        worker.join(60)                                   # would hang while the lock is held if it waited
        assert not worker.is_alive() and got == [True, True]
