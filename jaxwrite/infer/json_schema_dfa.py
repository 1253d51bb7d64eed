"""A JSON schema compiled to a byte DFA of canonical serialisations: every keyword is honoured or the
schema is refused (SchemaError naming the keyword and where), never accepted and then broken.

Output form: objects emit every listed property in schema order (`{"a": 1, "b": "x"}` spacing; the
schema's optional properties are emitted too, which the schema allows), arrays `[1, 2]`.

Honoured: type (one or a list), enum, const (any JSON value; filtered by the other keywords), anyOf,
oneOf (alternatives must not overlap: checked), allOf with one member, $ref to #/$defs/... or
#/definitions/... (not recursive); string minLength / maxLength (characters; minLength >= 1 also asks
for a visible first character); integer minimum / maximum / exclusiveMinimum / exclusiveMaximum (any
range with bounds below 10^30 in magnitude, exactly; an unbounded side stops at 15 digits, or one
digit past the other bound when that is longer), multipleOf 1; number with whole-number bounds (the
same, with up to 6 fraction digits); object properties, required (must be listed properties),
additionalProperties (none are emitted; a schema-valued one with no properties makes a map),
minProperties / maxProperties; array items, prefixItems, minItems, maxItems, uniqueItems false;
boolean, null; `{}` / `true` (any JSON value, nesting bounded). Annotations (title, description,
default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored, as validators
do. Everything else (pattern, format, multipleOf, not, if/then/else, patternProperties, ...) is
refused, and so is a keyword whose value has the wrong type or range (schema_keywords.check_keywords,
the one place that checks them). `compile_schema(JSON_OBJECT)` is response_format json_object: any
JSON object, nesting bounded.
"""
from __future__ import annotations

import json
from typing import Any

from jaxwrite.infer.byte_automaton import Budget, ByteDFA, Frag, Nfa, SchemaError, determinise, intersects
from jaxwrite.infer.schema_keywords import ANNOTATIONS, BY_TYPE, check_keywords

JSON_OBJECT = "json_object"
ANY_DEPTH = 2          # containers nested inside a `{}` (any value) sub-schema
OBJECT_DEPTH = 3       # containers nested in response_format json_object (the object itself included)
MAX_DIGITS = 15        # integer digits of an unbounded number side (a bound past it widens that side)
FRACTION_DIGITS = 6

_PRINTABLE = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E)]            # ASCII except '"' and '\\'
_UTF8 = [[(0xC2, 0xDF), (0x80, 0xBF)], [(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
         [(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)], [(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
         [(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)], [(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
         [(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
         [(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)]]   # Unicode's well-formed sequences
_HEX = [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)]
_NON_D_HEX = [(0x30, 0x39), (0x41, 0x43), (0x45, 0x46), (0x61, 0x63), (0x65, 0x66)]


def compile_schema(schema: dict | str, budget: Budget | None = None) -> ByteDFA:
    """The DFA of `schema`'s canonical serialisations (SchemaError if refused or over `budget`)."""
    budget = (budget or Budget()).start()
    nfa = Nfa(budget)
    if schema == JSON_OBJECT:
        frag = _Compiler(nfa, {}).any_object(OBJECT_DEPTH - 1)
    else:
        frag = _Compiler(nfa, schema).value(schema, "schema")
    return determinise(nfa, frag, budget)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _whole(x: int | float, where: str, key: str) -> int:
    """A bound (a finite number below 10^MAX_BOUND_DIGITS: check_keywords) as the integer it equals."""
    if isinstance(x, float) and not x.is_integer():
        raise SchemaError(f"{where}.{key}: {x} is not a whole number; only whole-number bounds are supported")
    return int(x)


class _Compiler:
    def __init__(self, nfa: Nfa, root):
        self.nfa = nfa
        self.root = root
        self._refs: list[str] = []

    # --- dispatch ----------------------------------------------------------------------------------
    def value(self, schema: Any, where: str) -> Frag:
        if schema is True or schema == {}:
            return self.any_value(ANY_DEPTH)
        if not isinstance(schema, dict):
            what = "false (nothing is valid)" if schema is False else type(schema).__name__
            raise SchemaError(f"{where}: expected a schema object, got {what}")
        check_keywords(schema, where)   # every keyword known and its value well-typed, before compiling
        asserting = {k for k in schema if k not in ANNOTATIONS}
        if "$ref" in schema:
            if asserting - {"$ref"}:
                raise SchemaError(f"{where}: $ref beside other keywords ({', '.join(sorted(asserting - {'$ref'}))}) "
                                  "is not supported")
            return self.ref(schema["$ref"], where)
        if "allOf" in schema:
            members = schema["allOf"]
            if len(members) != 1 or asserting - {"allOf"}:
                raise SchemaError(f"{where}.allOf: only a single member with no sibling keywords is supported")
            return self.value(members[0], f"{where}.allOf[0]")
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.alternatives(schema, key, asserting, where)
        if "enum" in schema or "const" in schema:
            return self.literals(schema, asserting, where)
        kinds = self.kinds(schema, where)
        if kinds is None:
            return self.any_value(ANY_DEPTH)
        return self.nfa.union([self.typed(kind, schema, where) for kind in kinds]) if len(kinds) > 1 \
            else self.typed(kinds[0], schema, where)

    def kinds(self, schema: dict, where: str) -> list[str] | None:
        kind = schema.get("type")
        if kind is None:   # inferred from the keywords present; none: any value
            found = [t for t, keys in BY_TYPE.items() if keys & set(schema) and t != "number"]
            if len(found) > 1 and set(found) != {"integer"}:
                raise SchemaError(f"{where}: keywords of several types ({', '.join(found)}) without a 'type'")
            return ["number" if found == ["integer"] else found[0]] if found else None
        kinds = kind if isinstance(kind, list) else [kind]   # names checked by check_keywords
        if "integer" in kinds and "number" in kinds:
            kinds = [k for k in kinds if k != "integer"]
        return kinds

    def typed(self, kind: str, schema: dict, where: str) -> Frag:
        if kind == "string":
            return self.string(schema, where)
        if kind in ("integer", "number"):
            return self.numeric(kind, schema, where)
        if kind == "object":
            return self.object(schema, where)
        if kind == "array":
            return self.array(schema, where)
        return self.nfa.literal(b"null") if kind == "null" else self.nfa.union(
            [self.nfa.literal(b"true"), self.nfa.literal(b"false")])

    # --- combinators ---------------------------------------------------------------------------------
    def ref(self, ref: Any, where: str) -> Frag:
        if not ref.startswith("#"):
            raise SchemaError(f"{where}.$ref: only local references (#/$defs/...) are supported, got {ref!r}")
        if ref in self._refs:
            raise SchemaError(f"{where}.$ref: {ref} is recursive; recursive schemas are not supported")
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise SchemaError(f"{where}.$ref: {ref} does not resolve")
            node = node[part]
        self._refs.append(ref)
        try:
            return self.value(node, ref)
        finally:
            self._refs.pop()

    def alternatives(self, schema: dict, key: str, asserting: set, where: str) -> Frag:
        subs = schema[key]
        if asserting - {key}:
            raise SchemaError(f"{where}.{key}: sibling keywords ({', '.join(sorted(asserting - {key}))}) are not "
                              "supported; move them into each alternative")
        if key == "oneOf" and len(subs) > 1:   # exactly one must match: the alternatives may not overlap
            dfas = [self.sub_dfa(s, f"{where}.oneOf[{i}]") for i, s in enumerate(subs)]
            for i in range(len(dfas)):
                for j in range(i + 1, len(dfas)):
                    if intersects(dfas[i], dfas[j], self.nfa.budget):
                        raise SchemaError(f"{where}.oneOf: alternatives {i} and {j} accept a common value, so "
                                          "the output could match both; use anyOf or make them exclusive")
        return self.nfa.union([self.value(s, f"{where}.{key}[{i}]") for i, s in enumerate(subs)])

    def sub_dfa(self, schema: Any, where: str) -> ByteDFA:
        """The DFA of a sub-schema on its own (same root for $ref, same budget)."""
        nfa = Nfa(self.nfa.budget)
        return determinise(nfa, _Compiler(nfa, self.root).value(schema, where), self.nfa.budget)

    def literals(self, schema: dict, asserting: set, where: str) -> Frag:
        if "const" in schema:
            values = [schema["const"]]
        else:
            values = schema["enum"]
        words = list(dict.fromkeys(_canonical(v) for v in values))
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const") and k not in ANNOTATIONS}
        if rest:   # the other keywords must hold too: keep the values their automaton accepts
            check = self.sub_dfa(rest, where)
            words = [w for w in words if check.accepts(w)]
            if not words:
                raise SchemaError(f"{where}: no enum/const value satisfies the schema's other keywords")
        return self.nfa.union([self.nfa.literal(w) for w in words])

    # --- scalars -----------------------------------------------------------------------------------------
    def string(self, schema: dict, where: str) -> Frag:
        least = schema.get("minLength", 0)
        most = schema.get("maxLength")
        if most is not None and most < least:
            raise SchemaError(f"{where}: minLength {least} exceeds maxLength {most}")
        nfa = self.nfa
        if least == 0:
            body = nfa.repeat(self.char, 0, most)
        else:   # a visible first character, then the rest
            rest = nfa.repeat(self.char, least - 1, None if most is None else most - 1)
            body = nfa.concat(self.char(visible=True), rest)
        return nfa.concat(nfa.literal(b'"'), body, nfa.literal(b'"'))

    def char(self, visible: bool = False) -> Frag:
        """One JSON string character: printable ASCII, a well-formed UTF-8 character (Unicode's table:
        no overlongs, surrogates or code points past U+10FFFF, so tokens holding partial characters can
        only complete them), or an escape (\\uXXXX only outside the surrogate range, so each escape is
        one character). Built deterministic, continuation states shared: ~15 states a character."""
        nfa = self.nfa
        start, end = nfa.new(), nfa.new()
        for lo, hi in ([(0x21, 0x21), (0x23, 0x5B), (0x5D, 0x7E)] if visible else _PRINTABLE):
            nfa.edge(start, lo, hi, end)
        tails = {0: end}
        for n in (1, 2, 3):                      # a state expecting n more continuation bytes
            tails[n] = nfa.new()
            nfa.edge(tails[n], 0x80, 0xBF, tails[n - 1])
        for seq in _UTF8:
            (lo, hi), rest = seq[0], seq[1:]
            if rest[0] == (0x80, 0xBF):          # any continuation bytes follow
                nfa.edge(start, lo, hi, tails[len(rest)])
            else:                                # a restricted second byte, then the rest
                second = nfa.new()
                nfa.edge(start, lo, hi, second)
                nfa.edge(second, rest[0][0], rest[0][1], tails[len(rest) - 1])
        if not visible:
            esc, u = nfa.new(), nfa.new()
            nfa.edge(start, 0x5C, 0x5C, esc)
            for c in '"\\/bfnrt':
                nfa.edge(esc, ord(c), ord(c), end)
            nfa.edge(esc, ord("u"), ord("u"), u)
            hex_left = {0: end}
            for n in (1, 2, 3):                  # n more hex digits
                hex_left[n] = nfa.new()
                for lo, hi in _HEX:
                    nfa.edge(hex_left[n], lo, hi, hex_left[n - 1])
            d = nfa.new()                        # \\uD then [0-7]: below the surrogates
            for lo, hi in _NON_D_HEX:
                nfa.edge(u, lo, hi, hex_left[3])
            nfa.edge(u, 0x44, 0x44, d)
            nfa.edge(u, 0x64, 0x64, d)
            nfa.edge(d, 0x30, 0x37, hex_left[2])
        return start, end

    def numeric(self, kind: str, schema: dict, where: str) -> Frag:
        if "multipleOf" in schema and schema["multipleOf"] != 1:
            raise SchemaError(f"{where}: keyword 'multipleOf' is not supported (except 1 on integers)",
                              "unsupported_keyword")
        lo = hi = None
        lo_x = hi_x = False
        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):   # the tightest of each side
            if key in schema:
                v = _whole(schema[key], where, key)
                if key == "minimum" and (lo is None or v >= lo):
                    lo, lo_x = v, False
                elif key == "exclusiveMinimum" and (lo is None or v >= lo):
                    lo, lo_x = v, True
                elif key == "maximum" and (hi is None or v <= hi):
                    hi, hi_x = v, False
                elif key == "exclusiveMaximum" and (hi is None or v <= hi):
                    hi, hi_x = v, True
        if lo is None and hi is None:   # unbounded: the plain pattern (far fewer states)
            return self.plain_number(kind == "integer")
        # An unbounded side stops at MAX_DIGITS digits, or a digit past the other bound when that lies
        # beyond (minimum 10^16 emits 10^16 .. 10^18 - 1): a subset of the valid values, never empty.
        cap = 10 ** MAX_DIGITS - 1
        if hi is None:
            hi = cap if lo <= cap - 1 else 10 ** (len(str(lo)) + 1) - 1
        if lo is None:
            lo = -cap if hi >= 1 - cap else -(10 ** (len(str(-hi)) + 1) - 1)
        if kind == "integer":
            lo, hi = lo + lo_x, hi - hi_x
            if lo > hi:
                raise SchemaError(f"{where}: no integer lies within its bounds")
            return self.integer_range(lo, hi)
        if lo > hi or (lo == hi and (lo_x or hi_x)):
            raise SchemaError(f"{where}: no number lies within its bounds")
        return self.number_range(lo, hi, lo_x, hi_x)

    def plain_number(self, integer: bool) -> Frag:
        """-?(0|[1-9][0-9]{0,14}) then, for numbers, an optional .[0-9]{1,6}."""
        nfa = self.nfa
        digit = lambda: nfa.byte_set([(0x30, 0x39)])  # noqa: E731
        whole = nfa.union([nfa.literal(b"0"), nfa.concat(nfa.byte_set([(0x31, 0x39)]),
                                                          nfa.repeat(digit, 0, MAX_DIGITS - 1))])
        out = nfa.concat(nfa.optional(nfa.literal(b"-")), whole)
        if integer:
            return out
        return nfa.concat(out, nfa.optional(nfa.concat(nfa.literal(b"."), nfa.repeat(digit, 1, FRACTION_DIGITS))))

    def integer_range(self, lo: int, hi: int) -> Frag:
        nfa = self.nfa
        alts = []
        if hi >= 0:
            alts += [self.digits(p) for p in _range_patterns(max(lo, 0), hi)]
        if lo < 0:
            alts += [nfa.concat(nfa.literal(b"-"), self.digits(p)) for p in _range_patterns(max(1, -hi), -lo)]
        return nfa.union(alts)

    def number_range(self, lo: int, hi: int, lo_x: bool, hi_x: bool) -> Frag:
        """Numbers I[.F] in the range with whole-number bounds, built from integer parts and the
        fraction each may take (any, all zeros, or not all zeros)."""
        nfa = self.nfa
        alts = []
        if hi >= 0:
            alts += self.magnitudes(max(lo, 0), hi, lo_x if lo >= 0 else False, hi_x)
        if lo < 0:   # -m with m in the negated range; m > 0 (no negative zero)
            a, a_x = (0, True) if hi >= 0 else (-hi, hi_x)
            alts += [nfa.concat(nfa.literal(b"-"), f) for f in self.magnitudes(a, -lo, a_x, lo_x)]
        return nfa.union(alts)

    def magnitudes(self, a: int, b: int, a_x: bool, b_x: bool) -> list[Frag]:
        if a == b:
            return [] if a_x or b_x else [self.with_fraction(a, a, "zero")]
        out = [self.with_fraction(a, a, "nonzero" if a_x else "any")]
        if b - 1 >= a + 1:
            out.append(self.with_fraction(a + 1, b - 1, "any"))
        if not b_x:
            out.append(self.with_fraction(b, b, "zero"))
        return out

    def with_fraction(self, lo: int, hi: int, fraction: str) -> Frag:
        nfa = self.nfa
        whole = nfa.union([self.digits(p) for p in _range_patterns(lo, hi)])
        digit = lambda lo_d=0x30: nfa.byte_set([(lo_d, 0x39)])  # noqa: E731
        if fraction == "zero":
            zeros = nfa.repeat(lambda: nfa.literal(b"0"), 1, FRACTION_DIGITS)
            return nfa.concat(whole, nfa.optional(nfa.concat(nfa.literal(b"."), zeros)))
        if fraction == "any":
            return nfa.concat(whole, nfa.optional(nfa.concat(nfa.literal(b"."), nfa.repeat(digit, 1, FRACTION_DIGITS))))
        tails = [nfa.concat(nfa.repeat(lambda: nfa.literal(b"0"), k, k), digit(0x31),
                            nfa.repeat(digit, 0, FRACTION_DIGITS - 1 - k)) for k in range(FRACTION_DIGITS)]
        return nfa.concat(whole, nfa.literal(b"."), nfa.union(tails))

    def digits(self, pattern: list[tuple[int, int]]) -> Frag:
        return self.nfa.concat(*[self.nfa.byte_set([(0x30 + a, 0x30 + b)]) for a, b in pattern])

    # --- containers --------------------------------------------------------------------------------------
    def object(self, schema: dict, where: str) -> Frag:
        nfa = self.nfa
        props = schema.get("properties", {})
        required = schema.get("required", [])
        missing = [n for n in required if n not in props]
        if missing:
            raise SchemaError(f"{where}.required: {missing!r} must be listed in properties (this server emits "
                              "exactly the listed properties)")
        extra = schema.get("additionalProperties", True)
        low, high = schema.get("minProperties", 0), schema.get("maxProperties")
        if not props and extra is not False:   # a map: any keys, values of `extra`
            if high is not None and high < low:
                raise SchemaError(f"{where}: minProperties {low} exceeds maxProperties {high}")
            value = (lambda: self.any_value(ANY_DEPTH)) if extra is True else \
                (lambda: self.value(extra, f"{where}.additionalProperties"))
            member = lambda: nfa.concat(self.string({}, where), nfa.literal(b": "), value())  # noqa: E731
            return nfa.concat(nfa.literal(b"{"), nfa.repeat(member, low, high, lambda: nfa.literal(b", ")),
                              nfa.literal(b"}"))
        if low > len(props) or (high is not None and high < len(props)):
            raise SchemaError(f"{where}: minProperties/maxProperties exclude emitting its {len(props)} properties")
        pieces = [nfa.literal(b"{")]
        for i, (name, sub) in enumerate(props.items()):
            pieces.append(nfa.literal((b", " if i else b"") + _canonical(name) + b": "))
            pieces.append(self.value(sub, f"{where}.properties.{name}"))
        pieces.append(nfa.literal(b"}"))
        return nfa.concat(*pieces)

    def array(self, schema: dict, where: str) -> Frag:
        nfa = self.nfa
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        if schema.get("uniqueItems") and (high is None or high > 1):
            raise SchemaError(f"{where}: keyword 'uniqueItems' is not supported (except with maxItems <= 1)",
                              "unsupported_keyword")
        if high is not None and (high < low or high < len(prefix)):
            raise SchemaError(f"{where}: maxItems {high} is below minItems or the prefixItems")
        sep = lambda: nfa.literal(b", ")  # noqa: E731
        pieces = [nfa.literal(b"[")]
        for i, sub in enumerate(prefix):
            if i:
                pieces.append(sep())
            pieces.append(self.value(sub, f"{where}.prefixItems[{i}]"))
        more_low = max(0, low - len(prefix))
        more_high = None if high is None else high - len(prefix)
        if items is False:
            if more_low:
                raise SchemaError(f"{where}: minItems exceeds the prefixItems while items is false")
        elif more_high != 0:
            item = lambda: self.value(items, f"{where}.items")  # noqa: E731
            if prefix:
                pieces.append(nfa.repeat(lambda: nfa.concat(sep(), item()), more_low, more_high))
            else:
                pieces.append(nfa.repeat(item, more_low, more_high, sep))
        pieces.append(nfa.literal(b"]"))
        return nfa.concat(*pieces)

    # --- any value ---------------------------------------------------------------------------------------
    def any_value(self, depth: int) -> Frag:
        nfa = self.nfa
        alts = [self.string({}, "any"), self.numeric("number", {}, "any"),
                *(nfa.literal(w) for w in (b"true", b"false", b"null"))]
        if depth > 0:
            alts += [self.any_object(depth - 1), self.any_array(depth - 1)]
        return nfa.union(alts)

    def any_object(self, depth: int) -> Frag:
        nfa = self.nfa
        member = lambda: nfa.concat(self.string({}, "any"), nfa.literal(b": "), self.any_value(depth))  # noqa: E731
        return nfa.concat(nfa.literal(b"{"), nfa.repeat(member, 0, None, lambda: nfa.literal(b", ")), nfa.literal(b"}"))

    def any_array(self, depth: int) -> Frag:
        nfa = self.nfa
        return nfa.concat(nfa.literal(b"["), nfa.repeat(lambda: self.any_value(depth), 0, None,
                                                        lambda: nfa.literal(b", ")), nfa.literal(b"]"))


def _range_patterns(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Digit patterns (a (first, last) digit range per position) spelling exactly the integers in
    [lo, hi] (0 <= lo <= hi) without leading zeros."""
    out = []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        a = max(lo, 10 ** (length - 1) if length > 1 else 0)
        b = min(hi, 10 ** length - 1)
        if a <= b:
            out += _same_length(str(a), str(b))
    return out


def _same_length(x: str, y: str) -> list[list[tuple[int, int]]]:
    """Patterns for the digit strings s of len(x) with x <= s <= y."""
    if not x:
        return [[]]
    n = len(x) - 1
    if x[1:] == "0" * n and y[1:] == "9" * n:
        return [[(int(x[0]), int(y[0]))] + [(0, 9)] * n]
    if x[0] == y[0]:
        return [[(int(x[0]), int(x[0]))] + p for p in _same_length(x[1:], y[1:])]
    out = [[(int(x[0]), int(x[0]))] + p for p in _same_length(x[1:], "9" * n)]
    if int(y[0]) - int(x[0]) > 1:
        out.append([(int(x[0]) + 1, int(y[0]) - 1)] + [(0, 9)] * n)
    out += [[(int(y[0]), int(y[0]))] + p for p in _same_length("0" * n, y[1:])]
    return out
