"""Contamination guard: refuse (or drop, with a count) training records whose query is a benchmark query.

A record query matches a protected (benchmark) query when either
  * exact: their normalised forms are equal (NFKC, lower-case, whitespace collapsed), or
  * near-exact: their n-gram sets overlap with coefficient |A ∩ B| / min(|A|, |B|) ≥ threshold
    (default 0.8). Units: word 13-grams for mostly-Latin text, character 8-grams (whitespace removed)
    when at least 30% of the letters are CJK. The overlap coefficient flags a record that copies a
    benchmark query inside a longer prompt, or copies most of a long benchmark query, while
    short generic queries (fewer than n units, so no n-grams) are only caught by the exact test.
Efficiency: the protected queries' n-grams are hashed to uint64 once and kept in one sorted array
with their query ids; a record costs one `searchsorted` over its own n-grams.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from typing import Sequence

import numpy as np

from jaxwrite.common import InputError, read_jsonl

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
_WORD = re.compile(r"\w+")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant for polynomial n-gram hashing
# The flags that drop overlapping records, as a user types them (the guard runs in data/prep commands
# and in training).
DROP_ADVICE = ("to drop and count them, re-run with --on-overlap drop (jaxwrite data / prep) or "
               "--config.data.on_overlap=drop (jaxwrite train)")


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _is_cjk(text: str) -> bool:
    letters = sum(ch.isalpha() for ch in text)
    return letters > 0 and len(_CJK.findall(text)) >= 0.3 * letters


def _units(text: str, cjk: bool) -> np.ndarray:
    """Unit ids: code points for CJK text, 64-bit word hashes otherwise."""
    if cjk:
        return np.frombuffer("".join(text.split()).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    words = _WORD.findall(text)
    return np.array([int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                     for w in words], dtype=np.uint64)


def ngram_hashes(text: str, n: int, cjk: bool) -> np.ndarray:
    """Sorted unique uint64 hashes of the text's n-grams (empty when shorter than n units)."""
    units = _units(normalise(text), cjk)  # [num_units]
    if len(units) < n:
        return np.zeros(0, np.uint64)
    count = len(units) - n + 1
    h = np.zeros(count, np.uint64)
    with np.errstate(over="ignore"):  # wrap-around is the hash
        for k in range(n):
            h = h * _MIX + units[k:k + count] + np.uint64(k + 1)
    return np.unique(h)


@dataclasses.dataclass(frozen=True)
class Overlap:
    protected_index: int  # position in the protected list
    kind: str             # "exact" | "ngram"
    coefficient: float


class ContaminationGuard:
    """Index of protected queries; `find(query)` returns the strongest overlap or None."""

    def __init__(self, protected: Sequence[str], *, word_n: int = 13, char_n: int = 8,
                 threshold: float = 0.8):
        self.word_n, self.char_n, self.threshold = word_n, char_n, threshold
        self.size = len(protected)
        self._exact = {normalise(q): i for i, q in enumerate(protected)}
        # Each protected query is indexed in both unit systems, so a zh record is compared against the
        # CJK n-grams of every query (including mixed-language ones) and an en record against words.
        self._index = {cjk: self._build(protected, char_n if cjk else word_n, cjk) for cjk in (False, True)}

    @staticmethod
    def _build(protected: Sequence[str], n: int, cjk: bool):
        per_query = [ngram_hashes(q, n, cjk) for q in protected]
        sizes = np.array([len(h) for h in per_query], np.int64)  # [num_protected]
        hashes = np.concatenate(per_query) if per_query else np.zeros(0, np.uint64)
        owners = np.repeat(np.arange(len(protected)), sizes)
        order = np.argsort(hashes, kind="stable")
        return hashes[order], owners[order], sizes

    @classmethod
    def from_writingbench(cls, benchmark_path: str, **kwargs) -> "ContaminationGuard":
        """Protects every `query` of WritingBench's benchmark_all.jsonl."""
        return cls([rec["query"] for _, rec in read_jsonl(benchmark_path, required=("query",))], **kwargs)

    def find(self, query: str) -> Overlap | None:
        hit = self._exact.get(normalise(query))
        if hit is not None:
            return Overlap(hit, "exact", 1.0)
        cjk = _is_cjk(query)
        mine = ngram_hashes(query, self.char_n if cjk else self.word_n, cjk)
        hashes, owners, sizes = self._index[cjk]
        if len(mine) == 0 or len(hashes) == 0:
            return None
        lo = np.searchsorted(hashes, mine, "left")
        hi = np.searchsorted(hashes, mine, "right")
        matched = np.concatenate([owners[a:b] for a, b in zip(lo, hi) if b > a] or [np.zeros(0, np.int64)])
        if len(matched) == 0:
            return None
        shared = np.bincount(matched, minlength=self.size)  # [num_protected]
        coef = shared / np.maximum(np.minimum(sizes, len(mine)), 1)
        best = int(np.argmax(coef))
        return Overlap(best, "ngram", float(coef[best])) if coef[best] >= self.threshold else None


def guard_records(records: Sequence[tuple[int, dict]], guard: ContaminationGuard | None, *, path: str,
                  query_field: str = "query", on_overlap: str = "error",
                  allow_overlap: bool = False) -> tuple[list[tuple[int, dict]], dict]:
    """Applies the guard to (line, record) pairs; returns (kept, stats).

    on_overlap="error" raises InputError naming the count, the first offending line and the flags that
    drop them; "drop" removes them and counts them; allow_overlap=True keeps them (still counted) and
    should be set only when the user insists.
    """
    if on_overlap not in ("error", "drop"):
        raise InputError(f"on_overlap: expected 'error' or 'drop' (--on-overlap, --config.data.on_overlap), "
                         f"got {on_overlap!r}")
    if guard is None:
        return list(records), {"overlapping": 0, "dropped": 0, "guard": "off"}
    kept, hits = [], []
    for lineno, rec in records:
        overlap = guard.find(rec[query_field])
        if overlap is None:
            kept.append((lineno, rec))
        else:
            hits.append((lineno, overlap))
            if allow_overlap:
                kept.append((lineno, rec))
    stats = {"overlapping": len(hits), "dropped": 0 if allow_overlap else len(hits),
             "guard": "allowed" if allow_overlap else on_overlap}
    if hits and not allow_overlap and on_overlap == "error":
        line, ov = hits[0]
        raise InputError(f"{len(hits)} record(s) overlap protected benchmark queries; first overlaps protected "
                         f"query #{ov.protected_index} ({ov.kind}, coefficient {ov.coefficient:.2f}); "
                         f"{DROP_ADVICE}", path=path, line=line, field=query_field)
    return kept, stats
