"""Byte automata for constrained decoding: an NFA built from fragments, made deterministic by subset
construction under a `Budget` (states and wall time), so a hostile schema is refused instead of
compiling for minutes or filling memory.

Fragments are Thompson-style (one start, one end; epsilon links join them). `determinise` explores
only reachable subsets and yields a `ByteDFA` whose rows are [states, 256] int32 (-1 = reject) with a
boolean `final` per state.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np


class SchemaError(ValueError):
    """A schema refused: unsupported (names the keyword and where) or over the compile budget.
    `status` / `code` are what the server answers with."""

    def __init__(self, message: str, code: str = "unsupported_schema"):
        super().__init__(message)
        self.status, self.code = 400, code


@dataclasses.dataclass
class Budget:
    """Limits of one schema compilation; `check` raises SchemaError(code="schema_too_complex")."""
    max_states: int = 20_000
    seconds: float = 5.0
    deadline: float = dataclasses.field(default=0.0, repr=False)

    def start(self) -> "Budget":
        return dataclasses.replace(self, deadline=time.monotonic() + self.seconds)

    def check_time(self, what: str) -> None:
        if self.deadline and time.monotonic() > self.deadline:
            raise SchemaError(f"schema: {what} exceeded the compile time budget of {self.seconds:g} s",
                              "schema_too_complex")

    def check_states(self, count: int, what: str) -> None:
        if count > self.max_states:
            raise SchemaError(f"schema: {what} needs more than {self.max_states} automaton states (the per-request "
                              "budget); simplify it (shorter constants or lengths, fewer properties, narrower ranges)",
                              "schema_too_complex")


@dataclasses.dataclass
class ByteDFA:
    """transitions [states, 256] int32 (-1 = reject); `start`; `final` [states] bool (the value may end)."""
    transitions: np.ndarray
    start: int
    final: np.ndarray

    def run(self, data: bytes, state: int | None = None) -> int:
        s = self.start if state is None else state
        for b in data:
            if s < 0:
                return -1
            s = int(self.transitions[s, b])
        return s

    def accepts(self, data: bytes) -> bool:
        s = self.run(data)
        return s >= 0 and bool(self.final[s])


Frag = tuple[int, int]   # (start, end) states of a fragment


class Nfa:
    """Byte NFA: edges are inclusive byte ranges (lo, hi, dst); `eps` are epsilon links."""

    # NFA states allowed per DFA state of the budget (an NFA is a few times larger than its DFA).
    STATES_PER_DFA_STATE = 8

    def __init__(self, budget: Budget):
        self.budget = budget
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []

    def new(self) -> int:
        self.edges.append([])
        self.eps.append([])
        n = len(self.edges)
        if n % 1024 == 0:
            self.budget.check_states(n // self.STATES_PER_DFA_STATE, "building its automaton")
            self.budget.check_time("building its automaton")
        return n - 1

    def edge(self, src: int, lo: int, hi: int, dst: int) -> None:
        self.edges[src].append((lo, hi, dst))

    def link(self, src: int, dst: int) -> None:
        self.eps[src].append(dst)

    # --- fragments ---------------------------------------------------------------------------------
    def empty(self) -> Frag:
        s = self.new()
        return s, s

    def literal(self, data: bytes) -> Frag:
        start = cur = self.new()
        for b in data:
            nxt = self.new()
            self.edge(cur, b, b, nxt)
            cur = nxt
        return start, cur

    def byte_set(self, ranges: list[tuple[int, int]]) -> Frag:
        start, end = self.new(), self.new()
        for lo, hi in ranges:
            self.edge(start, lo, hi, end)
        return start, end

    def concat(self, *frags: Frag) -> Frag:
        for (_, a_end), (b_start, _) in zip(frags, frags[1:]):
            self.link(a_end, b_start)
        return frags[0][0], frags[-1][1]

    def union(self, frags: list[Frag]) -> Frag:
        start, end = self.new(), self.new()
        for s, e in frags:
            self.link(start, s)
            self.link(e, end)
        return start, end

    def optional(self, frag: Frag) -> Frag:
        start, end = self.new(), self.new()
        self.link(start, frag[0])
        self.link(frag[1], end)
        self.link(start, end)
        return start, end

    def star(self, make) -> Frag:
        loop = self.new()
        item = make()
        self.link(loop, item[0])
        self.link(item[1], loop)
        return loop, loop

    def repeat(self, make, least: int, most: int | None, sep=None) -> Frag:
        """`make()` repeated least..most times (most None: unbounded), `sep()` between repetitions.
        Every copy's end links straight to one exit, so epsilon closures stay small (a chain of nested
        optionals would make closures, and so determinising, grow with the count)."""
        start, end = self.new(), self.new()
        if least == 0:
            self.link(start, end)
        cur = start
        fixed = least if most is not None else max(least, 1) - 1
        for i in range(fixed if most is None else most):
            if i and sep is not None:
                gap = sep()
                self.link(cur, gap[0])
                cur = gap[1]
            item = make()
            self.link(cur, item[0])
            cur = item[1]
            if most is not None and i + 1 >= least:
                self.link(cur, end)
        if most is None:                          # one looping copy: item (sep item)*
            if fixed and sep is not None:
                gap = sep()
                self.link(cur, gap[0])
                cur = gap[1]
            core = make()
            self.link(cur, core[0])
            self.link(core[1], end)
            back = sep() if sep is not None else None
            if back is not None:
                self.link(core[1], back[0])
                self.link(back[1], core[0])
            else:
                self.link(core[1], core[0])
        elif most == 0:
            self.link(start, end)
        return start, end


def determinise(nfa: Nfa, frag: Frag, budget: Budget) -> ByteDFA:
    """The DFA of `frag` (reachable subsets only), its end state as the accepting one."""
    start, end = frag
    closure_cache: dict[int, frozenset[int]] = {}

    def closure_of(state: int) -> frozenset[int]:
        got = closure_cache.get(state)
        if got is None:
            seen, stack = {state}, [state]
            while stack:
                for nxt in nfa.eps[stack.pop()]:
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            got = closure_cache[state] = frozenset(seen)
        return got

    def closure(states) -> frozenset[int]:
        out: set[int] = set()
        for s in states:
            out |= closure_of(s)
        return frozenset(out)

    first = closure([start])
    index = {first: 0}
    order = [first]
    rows: list[list[tuple[int, int, int]]] = []     # per DFA state: (lo, hi, dst DFA state)
    i = 0
    while i < len(order):
        subset = order[i]
        i += 1
        if i % 256 == 0:
            budget.check_time("determinising its automaton")
        ranges = sorted(r for s in subset for r in nfa.edges[s])
        row: list[tuple[int, int, int]] = []
        if all(a[1] < b[0] for a, b in zip(ranges, ranges[1:])):   # disjoint: one target per range
            for lo, hi, dst in ranges:
                target = closure_of(dst)
                if target not in index:
                    index[target] = len(order)
                    order.append(target)
                    budget.check_states(len(order), "its automaton")
                row.append((lo, hi, index[target]))
        elif ranges:
            cuts = sorted({lo for lo, _, _ in ranges} | {hi + 1 for _, hi, _ in ranges})
            for lo, nxt_cut in zip(cuts, cuts[1:]):
                hi = nxt_cut - 1
                targets = [d for a, b, d in ranges if a <= lo and hi <= b]
                if not targets:
                    continue
                target = closure(targets)
                if target not in index:
                    index[target] = len(order)
                    order.append(target)
                    budget.check_states(len(order), "its automaton")
                row.append((lo, hi, index[target]))
        rows.append(row)
    table = np.full((len(order), 256), -1, np.int32)                                  # [states, 256]
    for s, row in enumerate(rows):
        for lo, hi, dst in row:
            table[s, lo:hi + 1] = dst
    final = np.array([end in subset for subset in order], bool)
    return ByteDFA(table, 0, final)


def intersects(a: ByteDFA, b: ByteDFA, budget: Budget) -> bool:
    """Whether some byte string is accepted by both (breadth-first over the reachable state pairs)."""
    seen = {(a.start, b.start)}
    stack = [(a.start, b.start)]
    while stack:
        x, y = stack.pop()
        if a.final[x] and b.final[y]:
            return True
        both = (a.transitions[x] >= 0) & (b.transitions[y] >= 0)
        for byte in np.nonzero(both)[0]:
            pair = (int(a.transitions[x, byte]), int(b.transitions[y, byte]))
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
                if len(seen) % 4096 == 0:
                    budget.check_states(len(seen) // 4, "comparing its oneOf alternatives")
                    budget.check_time("comparing its oneOf alternatives")
    return False
