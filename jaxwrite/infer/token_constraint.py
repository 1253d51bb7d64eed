"""Token-level constraint tables: which tokens each DFA state allows, and where each leads.

A `TokenConstraint` lifts a byte DFA to the tokenizer's vocabulary by running every token's bytes from
every state (vectorised in numpy; tokens sorted longest first, so the tokens still running at byte j
are a prefix of the columns). `min_tokens[s]` is the fewest tokens from state s to the end (EOS
included); the engine only allows a token if the end stays reachable within the remaining
`max_new_tokens`, so a constrained sample always finishes as parseable JSON.

State 0 of a `ConstraintSet` is "unconstrained" (every token allowed, no budget), so constrained and
free requests share one decode batch; a schema's states follow, in one dense [states, vocab] table
that the decode step gathers from on device. Compilation is bounded (`ConstraintLimits`: states,
seconds) and its results are kept in an LRU bounded in bytes; a cached schema (or a cached refusal)
is answered without waiting for another request's compilation.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import threading
import time
from typing import Sequence

import numpy as np

from jaxwrite.infer.byte_automaton import Budget, ByteDFA, SchemaError
from jaxwrite.infer.json_schema_dfa import compile_schema

_INCOMPLETE = "\ufffd"
_UNREACHABLE = np.iinfo(np.int32).max // 2
_BLOCK = 1 << 22    # table entries handled per numpy block when collecting edges (bounds temporaries)


def vocab_bytes(tokenizer, vocab_size: int) -> list[bytes | None]:
    """The bytes each token adds to decoded text, or None when that is not well defined.

    Exact when the tokenizer knows its tokens' bytes (`Tokenizer.token_bytes`: byte-level BPE and
    SentencePiece), partial UTF-8 characters included (the automaton only lets them complete).
    Otherwise, decoding a token next to an ordinary anchor token gives its text with any leading-space
    marker applied; tokens that decode to nothing (special tokens) or to part of a UTF-8 character
    are then None and never allowed inside constrained output.
    """
    exact = getattr(tokenizer, "token_bytes", lambda: None)()
    if exact is not None:
        return [exact[i] if i < len(exact) else None for i in range(vocab_size)]
    anchor = tokenizer.encode("a")[-1]
    base = tokenizer.decode([anchor])
    out: list[bytes | None] = []
    real = tokenizer.vocab_size
    for i in range(vocab_size):
        if i >= real:
            out.append(None)   # embedding rows past the tokenizer's vocabulary
            continue
        text = tokenizer.decode([anchor, i])
        if not text.startswith(base) or len(text) == len(base) or _INCOMPLETE in text:
            out.append(None)
            continue
        out.append(text[len(base):].encode("utf-8"))
    return out


@dataclasses.dataclass
class TokenConstraint:
    """next_state [states, vocab] int32 (-1 = not allowed); min_tokens [states]; start; `ended` (after
    EOS); `key` the schema's cache key."""
    next_state: np.ndarray
    min_tokens: np.ndarray
    start: int
    ended: int
    key: str = ""

    @property
    def nbytes(self) -> int:
        return self.next_state.nbytes + self.min_tokens.nbytes


def lift_to_tokens(dfa: ByteDFA, token_bytes: Sequence[bytes | None], eos_ids: Sequence[int],
                   budget: Budget | None = None) -> TokenConstraint:
    states, vocab = dfa.transitions.shape[0], len(token_bytes)
    lengths = np.array([len(b) if b else 0 for b in token_bytes], np.int32)            # [vocab]
    order = np.argsort(-lengths, kind="stable")                                         # longest first
    sorted_len = lengths[order]
    width = int(lengths.max(initial=1))
    matrix = np.zeros((vocab, max(width, 1)), np.uint8)                                  # [vocab, bytes]
    for row, i in enumerate(order):
        b = token_bytes[i]
        if b:
            matrix[row, :len(b)] = np.frombuffer(b, np.uint8)
    running = [int(np.count_nonzero(sorted_len > j)) for j in range(width)] + [0]   # tokens with a byte j
    flat = dfa.transitions.ravel()
    table = np.full((states + 1, vocab), -1, np.int32)       # [states + ended, vocab]
    rows = max(1, _BLOCK // max(vocab, 1))     # states per block: temporaries stay ~_BLOCK entries
    for first in range(0, states, rows):
        cur = np.full((min(rows, states - first), vocab), -1, np.int32)                  # sorted columns
        cur[:, :running[0]] = dfa.transitions[first:first + cur.shape[0]][:, matrix[:running[0], 0]]
        # The (state, token) pairs still alive after the first byte and longer than it: walk only those.
        r, c = np.nonzero(cur[:, :running[1]] >= 0)
        at = cur[r, c]
        for j in range(1, width):
            if r.size == 0:
                break
            at = flat[at.astype(np.int64) * 256 + matrix[c, j]]
            finished = (at < 0) | (c >= running[j + 1])       # rejected, or the token's last byte
            cur[r[finished], c[finished]] = at[finished]
            keep = ~finished
            r, c, at = r[keep], c[keep], at[keep]
        table[first:first + cur.shape[0], order] = cur
        if budget is not None:
            budget.check_time("lifting it to tokens")
    # EOS only from a final state, into an extra "ended" state that allows nothing; the budget then
    # counts the EOS too, so a constrained sample always ends with finish_reason "stop".
    ended = states
    eos = list(eos_ids)
    table[:, eos] = -1
    table[np.nonzero(dfa.final)[0][:, None], np.asarray(eos, np.int64)[None, :]] = ended
    return TokenConstraint(table, _min_tokens(table, ended, budget), dfa.start, ended)


def _min_tokens(next_state: np.ndarray, ended: int, budget: Budget | None = None) -> np.ndarray:
    """Fewest tokens from each state to `ended` (0 there): breadth-first search backwards over the
    distinct (state -> state) edges, collected in row blocks so temporaries stay bounded."""
    count, vocab = next_state.shape
    rows = max(1, min(count, _BLOCK // max(vocab, 1), _BLOCK // max(count, 1)))
    src_parts, dst_parts = [], []
    for first in range(0, count, rows):
        block = next_state[first:first + rows]                                          # [rows, vocab]
        seen = np.zeros((block.shape[0], count + 1), bool)                              # last column: -1
        seen[np.arange(block.shape[0])[:, None], np.where(block >= 0, block, count)] = True
        src, dst = np.nonzero(seen[:, :count])
        src_parts.append(src + first)
        dst_parts.append(dst)
        if budget is not None:
            budget.check_time("measuring its distances")
    src, dst = np.concatenate(src_parts), np.concatenate(dst_parts)
    by_dst = np.argsort(dst, kind="stable")
    preds, starts = src[by_dst], np.searchsorted(dst[by_dst], np.arange(count + 1))
    dist = np.full(count, _UNREACHABLE, np.int64)
    dist[ended] = 0
    frontier, level = np.array([ended]), 0
    while frontier.size:
        level += 1
        lo, n = starts[frontier], starts[frontier + 1] - starts[frontier]
        gather = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        reached = preds[gather]
        frontier = np.unique(reached[dist[reached] == _UNREACHABLE])
        dist[frontier] = level
    return np.minimum(dist, _UNREACHABLE).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class ConstraintLimits:
    """Bounds on schema compilation. A schema needing more than `max_states` states (default: what
    `max_table_bytes` of dense [states, vocab] int32 table holds, at most 100,000) or more than
    `compile_s` seconds is refused (400); compiled tables are kept in an LRU of `cache_bytes`."""
    max_states: int | None = None
    compile_s: float = 5.0
    max_table_bytes: int = 1 << 30
    cache_bytes: int = 2 << 30
    cached_refusals: int = 1024

    def states_for(self, vocab: int) -> int:
        if self.max_states is not None:
            return self.max_states
        return max(64, min(100_000, self.max_table_bytes // (4 * max(vocab, 1))))


@dataclasses.dataclass
class Layout:
    """Where schemas sit in a stacked table: first state per schema key, and the compiled parts."""
    firsts: dict[str, int]
    parts: dict[str, TokenConstraint]

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and self.firsts == other.firsts


class ConstraintSet:
    """Compiled schemas of one engine, stacked into one table whose state 0 is unconstrained.

    `compile(schema)` returns the cached TokenConstraint or builds it within the limits; `layout`
    places compiled schemas (start state per row, a Layout); `state_table` builds next_state
    [states, vocab] and min_tokens [states] for a layout, state counts padded to a power of two so
    decode functions compile once per bucket; `state_map` carries live rows' states into a rebuilt table.
    """

    def __init__(self, tokenizer, vocab_size: int, eos_ids: Sequence[int], limits: ConstraintLimits | None = None):
        self._tokenizer = tokenizer
        self._eos_ids = [int(i) for i in eos_ids]
        self._vocab = vocab_size
        self.limits = limits or ConstraintLimits()
        self.max_states = self.limits.states_for(vocab_size)
        self._bytes: list[bytes | None] | None = None
        self._cache: collections.OrderedDict[str, TokenConstraint] = collections.OrderedDict()
        self._refused: collections.OrderedDict[str, SchemaError] = collections.OrderedDict()
        self._cache_lock = threading.Lock()     # dictionary operations only: never held while compiling
        self._compile_lock = threading.Lock()   # one compilation at a time (bounds its memory and CPU)
        self.cached_bytes = 0
        self.hits = self.misses = 0
        self.last_compile_s = 0.0

    @staticmethod
    def key(schema: dict | str) -> str:
        return json.dumps(schema, sort_keys=True)

    def token_bytes(self) -> list[bytes | None]:
        """`vocab_bytes` of the tokenizer, computed once (under the compile lock's caller)."""
        if self._bytes is None:
            self._bytes = vocab_bytes(self._tokenizer, self._vocab)
        return self._bytes

    def _lookup(self, key: str) -> TokenConstraint | None:
        with self._cache_lock:
            tc = self._cache.get(key)
            if tc is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return tc
            refusal = self._refused.get(key)
        if refusal is not None:
            raise SchemaError(str(refusal), refusal.code)
        return None

    def compile(self, schema: dict | str) -> TokenConstraint:
        """The token constraint of `schema` (SchemaError, a ValueError, when refused or over budget)."""
        key = self.key(schema)
        tc = self._lookup(key)
        if tc is not None:
            return tc
        with self._compile_lock:
            tc = self._lookup(key)                 # compiled by another request while this one waited
            if tc is not None:
                return tc
            started = time.monotonic()
            budget = Budget(self.max_states, self.limits.compile_s).start()
            try:
                dfa = compile_schema(schema, budget)
                tc = lift_to_tokens(dfa, self.token_bytes(), self._eos_ids, budget)
            except SchemaError as err:
                with self._cache_lock:
                    self._refused[key] = err
                    while len(self._refused) > self.limits.cached_refusals:
                        self._refused.popitem(last=False)
                raise
            finally:
                self.last_compile_s = time.monotonic() - started
            tc.key = key
            with self._cache_lock:
                self.misses += 1
                if tc.nbytes <= self.limits.cache_bytes:
                    self._cache[key] = tc
                    self.cached_bytes += tc.nbytes
                    while self.cached_bytes > self.limits.cache_bytes:
                        _, old = self._cache.popitem(last=False)
                        self.cached_bytes -= old.nbytes
            return tc

    def layout(self, constraints: Sequence[TokenConstraint | None]) -> tuple[list[int], Layout]:
        """Where each compiled schema's states go in a stacked table: (start state per entry, the Layout:
        first state per schema key in order of first use). Cheap; `state_table` builds the arrays."""
        firsts: dict[str, int] = {}
        parts: dict[str, TokenConstraint] = {}
        starts = []
        total = 1                                           # state 0: free
        for tc in constraints:
            if tc is None:
                starts.append(0)
                continue
            if tc.key not in firsts:
                firsts[tc.key], parts[tc.key] = total, tc
                total += tc.next_state.shape[0]
            starts.append(firsts[tc.key] + tc.start)
        return starts, Layout(firsts, parts)

    def state_table(self, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
        """(next_state [states, vocab], min_tokens [states]) of `layout`, state counts padded to a power of two."""
        total = 1 + sum(tc.next_state.shape[0] for tc in layout.parts.values())
        padded = 1 << (total - 1).bit_length()
        table = np.full((padded, self._vocab), -1, np.int32)                             # [states, vocab]
        table[0] = 0                                        # state 0: free, loops on itself
        dist = np.full((padded,), _UNREACHABLE, np.int32)
        dist[0] = 0
        for key, first in layout.firsts.items():
            tc = layout.parts[key]
            count = tc.next_state.shape[0]
            table[first:first + count] = np.where(tc.next_state >= 0, tc.next_state + first, -1)
            dist[first:first + count] = tc.min_tokens
        return table, dist

    def state_map(self, old: Layout, new: Layout, old_states: int) -> np.ndarray:
        """[old_states] int32: each state of a table built with layout `old` -> the same state in the
        table built with `new` (state 0 and schemas absent from `new` -> 0)."""
        mapping = np.zeros((old_states,), np.int32)
        for key, start in old.firsts.items():
            if key in new.firsts:
                count = old.parts[key].next_state.shape[0]
                mapping[start:start + count] = np.arange(count) + new.firsts[key]
        return mapping
