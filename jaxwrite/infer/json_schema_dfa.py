"""A JSON schema compiled to a byte-level DFA that accepts exactly one canonical serialisation.

Supported: objects (properties emitted in schema order, all of them, `{"a": 1, "b": "x"}` spacing,
nested objects allowed), integer (a `minimum`..`maximum` range of at most 10,000 values is enforced
exactly; otherwise up to 15 digits), number (up to 15 integer and 6 fraction digits), string
(any UTF-8 text with JSON escapes; `minLength` 1 asks for a visible first character), boolean, null, and `enum` of
JSON scalars. Arrays, `anyOf`,
patterns and optional properties are not supported and raise ValueError naming the construct.
Because the accepted language is regular, token masks can be precomputed per state (see
`token_constraint.py`).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

_MAX_RANGE = 10_000
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"


@dataclasses.dataclass
class ByteDFA:
    """transitions [states, 256] int32 (-1 = reject); `start`; `accept` is the single final state."""
    transitions: np.ndarray
    start: int
    accept: int

    def run(self, data: bytes, state: int | None = None) -> int:
        s = self.start if state is None else state
        for b in data:
            if s < 0:
                return -1
            s = int(self.transitions[s, b])
        return s


class _Builder:
    """States are rows of a growing table; a piece adds states and returns its exit states."""

    def __init__(self):
        self.rows: list[dict[int, int]] = []

    def new(self) -> int:
        self.rows.append({})
        return len(self.rows) - 1

    def edge(self, src: int, byte: int, dst: int) -> None:
        if self.rows[src].get(byte, dst) != dst:
            raise ValueError("schema is ambiguous at the byte level (unsupported)")
        self.rows[src][byte] = dst

    def join(self, exits: list[int], start: int) -> None:
        """Epsilon-joins each exit state to `start` by copying start's outgoing edges."""
        for e in exits:
            for byte, dst in self.rows[start].items():
                self.edge(e, byte, dst)

    # --- pieces: each returns (start, exits) -------------------------------------------------
    def literal(self, text: bytes) -> tuple[int, list[int]]:
        start = cur = self.new()
        for b in text:
            nxt = self.new()
            self.edge(cur, b, nxt)
            cur = nxt
        return start, [cur]

    def alternatives(self, words: list[bytes]) -> tuple[int, list[int]]:
        """A trie over `words`; its word-final nodes are the exits."""
        start = self.new()
        exits = []
        for word in dict.fromkeys(words):
            cur = start
            for b in word:
                nxt = self.rows[cur].get(b)
                if nxt is None:
                    nxt = self.new()
                    self.edge(cur, b, nxt)
                cur = nxt
            exits.append(cur)
        return start, sorted(set(exits))

    def digits(self, src: int, count: int) -> list[int]:
        """Up to `count` more digits after `src`; every reached state (and src) is an exit."""
        exits, cur = [src], src
        for _ in range(count):
            nxt = self.new()
            for b in _DIGITS:
                self.edge(cur, b, nxt)
            exits.append(nxt)
            cur = nxt
        return exits

    def integer(self, max_digits: int = 15) -> tuple[int, list[int]]:
        start, after_sign, zero, lead = self.new(), self.new(), self.new(), self.new()
        self.edge(start, ord("-"), after_sign)
        for src in (start, after_sign):
            self.edge(src, ord("0"), zero)
            for b in b"123456789":
                self.edge(src, b, lead)
        return start, [zero] + self.digits(lead, max_digits - 1)

    def number(self) -> tuple[int, list[int]]:
        start, int_exits = self.integer()
        dot = self.new()
        for e in int_exits:
            self.edge(e, ord("."), dot)
        first = self.new()
        for b in _DIGITS:
            self.edge(dot, b, first)
        return start, int_exits + self.digits(first, 5)

    def utf8_multibyte(self, start: int, end: int) -> None:
        """Edges from start to end spelling one well-formed multi-byte UTF-8 character (Unicode's
        table of well-formed byte sequences: no overlongs, surrogates or code points past U+10FFFF),
        so tokens holding partial characters can only ever complete them."""
        tails = {0: end}
        for n in (1, 2, 3):                  # a state expecting n more continuation bytes
            tails[n] = self.new()
            for b in range(0x80, 0xC0):
                self.edge(tails[n], b, tails[n - 1])
        ranges = [((0xC2, 0xDF), None, 1), ((0xE0, 0xE0), (0xA0, 0xBF), 1), ((0xE1, 0xEC), None, 2),
                  ((0xED, 0xED), (0x80, 0x9F), 1), ((0xEE, 0xEF), None, 2), ((0xF0, 0xF0), (0x90, 0xBF), 2),
                  ((0xF1, 0xF3), None, 3), ((0xF4, 0xF4), (0x80, 0x8F), 2)]
        for (lo, hi), second, rest in ranges:
            if second is None:               # any continuation bytes follow
                for b in range(lo, hi + 1):
                    self.edge(start, b, tails[rest])
                continue
            after = self.new()               # a restricted second byte, then `rest` more
            for b in range(lo, hi + 1):
                self.edge(start, b, after)
            for b in range(second[0], second[1] + 1):
                self.edge(after, b, tails[rest])

    def string(self, non_empty: bool = False) -> tuple[int, list[int]]:
        """A JSON string. `non_empty` (schema minLength 1) requires a visible first character: generated
        fields must carry text, and a lone space or escaped newline would satisfy a bare length rule."""
        start, body, esc, done = self.new(), self.new(), self.new(), self.new()
        first = self.new() if non_empty else body
        self.edge(start, ord('"'), first)
        for b in range(0x20, 0x80):
            if b not in (ord('"'), ord("\\"), 0x7F):
                self.edge(body, b, body)
                if non_empty and b != 0x20:
                    self.edge(first, b, body)
        for entry in (body, first) if non_empty else (body,):
            self.utf8_multibyte(entry, body)
        self.edge(body, ord("\\"), esc)
        self.edge(body, ord('"'), done)
        for b in b'"\\/bfnrt':
            self.edge(esc, b, body)
        hex_states = [self.new() for _ in range(4)]
        self.edge(esc, ord("u"), hex_states[0])
        for i, h in enumerate(hex_states):
            nxt = hex_states[i + 1] if i + 1 < 4 else body
            for b in _HEX:
                self.edge(h, b, nxt)
        return start, [done]

    def value(self, schema: Any, where: str) -> tuple[int, list[int]]:
        if not isinstance(schema, dict):
            raise ValueError(f"{where}: expected a schema object, got {type(schema).__name__}")
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values or any(isinstance(v, (dict, list)) for v in values):
                raise ValueError(f"{where}.enum: expected a non-empty list of JSON scalars")
            return self.alternatives([json.dumps(v, ensure_ascii=False).encode() for v in values])
        if "const" in schema:
            return self.literal(json.dumps(schema["const"], ensure_ascii=False).encode())
        kind = schema.get("type")
        if kind == "object":
            return self.object(schema, where)
        if kind == "string":
            min_length = schema.get("minLength", 0)
            if not isinstance(min_length, int) or min_length < 0 or min_length > 1:
                raise ValueError(f"{where}.minLength: expected 0 or 1 (longer minimums are not supported)")
            return self.string(non_empty=min_length == 1)
        if kind == "boolean":
            return self.alternatives([b"true", b"false"])
        if kind == "null":
            return self.literal(b"null")
        if kind == "number":
            return self.number()
        if kind == "integer":
            lo, hi = schema.get("minimum"), schema.get("maximum")
            if isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo < _MAX_RANGE:
                return self.alternatives([str(v).encode() for v in range(lo, hi + 1)])
            return self.integer()
        raise ValueError(f"{where}: unsupported schema (type {kind!r}); expected object, string, integer, "
                         f"number, boolean, null, enum or const")

    def object(self, schema: dict, where: str) -> tuple[int, list[int]]:
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            raise ValueError(f"{where}: expected an object schema with non-empty 'properties'")
        start, exits = self.literal(b"{")
        for i, (name, sub) in enumerate(props.items()):
            sep = (b", " if i else b"") + json.dumps(name, ensure_ascii=False).encode() + b": "
            s, e = self.literal(sep)
            self.join(exits, s)
            exits = e
            s, e = self.value(sub, f"{where}.properties.{name}")
            self.join(exits, s)
            exits = e
        s, e = self.literal(b"}")
        self.join(exits, s)
        return start, e


def compile_schema(schema: dict) -> ByteDFA:
    """Builds the DFA of `schema`'s canonical serialisation (ValueError for unsupported schemas)."""
    builder = _Builder()
    start, exits = builder.value(schema, "schema")
    accept = builder.new()
    # One accept state with no outgoing bytes: every exit state must be terminal for this to hold.
    for e in exits:
        if builder.rows[e]:
            raise ValueError("schema: the top-level value must end unambiguously (use an object)")
    table = np.full((len(builder.rows), 256), -1, np.int32)
    for src, row in enumerate(builder.rows):
        for byte, dst in row.items():
            table[src, byte] = dst
    # Redirect transitions into exit states to the single accept state.
    for e in exits:
        table[table == e] = accept
    return ByteDFA(table, start, accept)
