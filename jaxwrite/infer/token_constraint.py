"""Token-level constraint tables: which tokens each DFA state allows, and where each leads.

A `TokenConstraint` lifts a byte DFA to the tokenizer's vocabulary by running every token's bytes
from every state (vectorised in numpy). `min_tokens[s]` is the fewest tokens from state s to the
accept state; the engine only allows a token if the accept state stays reachable within the
remaining `max_new_tokens` (EOS included), so a constrained sample always finishes as parseable JSON.

State 0 of a `ConstraintSet` is "unconstrained" (every token allowed, no budget), so constrained and
free requests share one decode batch. Once the JSON is complete only EOS is allowed.
"""
from __future__ import annotations

import dataclasses
import json
import threading
from typing import Sequence

import numpy as np

from jaxwrite.infer.json_schema_dfa import ByteDFA, compile_schema

_INCOMPLETE = "\ufffd"
_UNREACHABLE = np.iinfo(np.int32).max // 2


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
    """next_state [states, vocab] int32 (-1 = not allowed); min_tokens [states]; start; `ended` (after EOS)."""
    next_state: np.ndarray
    min_tokens: np.ndarray
    start: int
    ended: int


def lift_to_tokens(dfa: ByteDFA, token_bytes: Sequence[bytes | None], eos_ids: Sequence[int]) -> TokenConstraint:
    states, vocab = dfa.transitions.shape[0], len(token_bytes)
    lengths = np.array([len(b) if b else 0 for b in token_bytes], np.int32)            # [vocab]
    width = int(lengths.max(initial=1))
    matrix = np.zeros((vocab, width), np.uint8)                                         # [vocab, bytes]
    for i, b in enumerate(token_bytes):
        if b:
            matrix[i, :len(b)] = np.frombuffer(b, np.uint8)
    cur = np.broadcast_to(np.arange(states, dtype=np.int32)[:, None], (states, vocab)).copy()
    cur[:, lengths == 0] = -1
    for j in range(width):
        live = (lengths > j)[None, :] & (cur >= 0)
        stepped = dfa.transitions[np.maximum(cur, 0), matrix[None, :, j]]
        cur = np.where(live, stepped, cur)
    # EOS only from the accept state, into an extra "ended" state; nothing else leaves accept. The
    # budget then counts the EOS too, so a constrained sample always ends with finish_reason "stop".
    ended = states
    cur = np.concatenate([cur, np.full((1, vocab), -1, np.int32)])
    cur[:, list(eos_ids)] = -1
    cur[dfa.accept, :] = -1
    cur[dfa.accept, list(eos_ids)] = ended
    return TokenConstraint(cur, _min_tokens(cur, ended), dfa.start, ended)


def _min_tokens(next_state: np.ndarray, accept: int) -> np.ndarray:
    """Bellman-Ford over token edges: fewest tokens from each state to `accept` (0 there)."""
    dist = np.full(next_state.shape[0] + 1, _UNREACHABLE, np.int64)   # last slot: the reject sink
    dist[accept] = 0
    target = np.where(next_state >= 0, next_state, next_state.shape[0])
    for _ in range(next_state.shape[0]):
        best = dist[target].min(axis=1) + 1
        new = np.minimum(dist[:-1], best)
        new[accept] = 0
        if np.array_equal(new, dist[:-1]):
            break
        dist[:-1] = new
    return np.minimum(dist[:-1], _UNREACHABLE).astype(np.int32)


class ConstraintSet:
    """Compiled schemas of one engine, stacked into one table whose state 0 is unconstrained.

    `layout(schemas)` places the schemas (start state per schema, first state per key); `state_table`
    builds next_state [states, vocab] and min_tokens [states] for a layout, state counts padded to a
    power of two so decode functions compile once per bucket; `state_map` carries live rows' states
    into a rebuilt table.
    """

    def __init__(self, tokenizer, vocab_size: int, eos_ids: Sequence[int]):
        self._tokenizer = tokenizer
        self._eos_ids = [int(i) for i in eos_ids]
        self._vocab = vocab_size
        self._bytes: list[bytes | None] | None = None
        self._compiled: dict[str, TokenConstraint] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(schema: dict) -> str:
        return json.dumps(schema, sort_keys=True)

    def token_bytes(self) -> list[bytes | None]:
        """`vocab_bytes` of the tokenizer, computed once."""
        with self._lock:
            if self._bytes is None:
                self._bytes = vocab_bytes(self._tokenizer, self._vocab)
            return self._bytes

    def compile(self, schema: dict) -> TokenConstraint:
        """Compiles (once) and returns the token constraint of `schema`; ValueError if unsupported."""
        key = self.key(schema)
        token_bytes = self.token_bytes()
        with self._lock:
            if key not in self._compiled:
                dfa = compile_schema(schema)
                self._compiled[key] = lift_to_tokens(dfa, token_bytes, self._eos_ids)
            return self._compiled[key]

    def layout(self, schemas: Sequence[dict | None]) -> tuple[list[int], dict[str, int]]:
        """Where each schema's states go in a stacked table: (start state per schema, first state per
        schema key in order of first use). Cheap; `state_table(offsets)` builds the arrays."""
        offsets: dict[str, int] = {}
        starts = []
        total = 1                                           # state 0: free
        for schema in schemas:
            if schema is None:
                starts.append(0)
                continue
            key = self.key(schema)
            tc = self.compile(schema)
            if key not in offsets:
                offsets[key] = total
                total += tc.next_state.shape[0]
            starts.append(offsets[key] + tc.start)
        return starts, offsets

    def state_table(self, offsets: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(next_state [states, vocab], min_tokens [states]) of the layout `offsets`, state counts padded
        to a power of two."""
        total = 1 + sum(self._compiled[key].next_state.shape[0] for key in offsets)
        padded = 1 << (total - 1).bit_length()
        table = np.full((padded, self._vocab), -1, np.int32)
        table[0] = 0                                        # state 0: free, loops on itself
        dist = np.full((padded,), _UNREACHABLE, np.int32)
        dist[0] = 0
        for key, first in offsets.items():
            tc = self._compiled[key]
            count = tc.next_state.shape[0]
            table[first:first + count] = np.where(tc.next_state >= 0, tc.next_state + first, -1)
            dist[first:first + count] = tc.min_tokens
        return table, dist

    def state_map(self, old: dict[str, int], new: dict[str, int], old_states: int) -> np.ndarray:
        """[old_states] int32: each state of a table built with offsets `old` -> the same state in the
        table built with offsets `new` (state 0 and schemas absent from `new` -> 0)."""
        mapping = np.zeros((old_states,), np.int32)
        for key, start in old.items():
            if key in new:
                count = self._compiled[key].next_state.shape[0]
                mapping[start:start + count] = np.arange(count) + new[key]
        return mapping
