"""A RULE TEACHER, NOT A MODEL: transparent verdicts for tiny-scale critic training.

Rule: score = round(10 × share), at least 1, where share is the fraction of the response's CJK
characters that belong to the rule's set `GOOD` (the Chinese corpus's 10 commonest characters,
了不一道來的人是我他); a response without CJK characters scores 1. The reason states the count. It
ignores the query and the criterion on purpose: the point at tiny scale is to check that a critic
trained on held-in verdicts reproduces a teacher on held-out ones, with a teacher anyone can verify.
Real critic data comes from a real judge (`jaxwrite prep critic-score --critic-url ...`) through the
same builder (`jaxwrite data critic-data`).

Responses need no model: each is `RESPONSE_CHARS` characters drawn (one seeded generator) from the
corpus's 20 commonest characters, `GOOD` at one of the shares 0.2, 0.6, 1.0 and `OTHER` (ranks
11..20) for the rest, in random order; so the demo's scores are 2, 6 and 10, three levels of the
protocol's 1..10 scale (exact agreement means something at tiny scale; five levels 2..10 were learned
more weakly in the same budget: ρ 0.52-0.61 with the argmax on two values only). They answer the
English WritingBench (query, criterion) pairs with the shortest official critic prompts.

Why this rule: a 2-layer model reads the score at ONE token (the digit after `{"score": `) from
about 1,100 prompt tokens; a per-token share over fixed-length Chinese text inside an English prompt
is what one attention average can measure (a length count, the previous rule, was not learned in
15 CPU minutes).
"""
from __future__ import annotations

import collections
import os

import numpy as np

from jaxwrite.common import InputError, read_jsonl

GOOD = "了不一道來的人是我他"     # the Chinese corpus's 10 commonest characters (corpus_text order)
OTHER = "個你有說那去這大上子"    # its 11th..20th commonest, the rest of each demo response
RESPONSE_CHARS = 60
SHARES = (0.2, 0.6, 1.0)
TEACHER = ("rule teacher, not a model: score = round(10 × share of the response's CJK characters in the "
           f"set {GOOD}), at least 1; demo responses are {RESPONSE_CHARS} characters at shares "
           "0.2, 0.6, 1.0, so scores are 2, 6, 10 (three levels of the 1..10 scale)")


def rule_verdict(query: str, response: str, criterion) -> dict:
    """{score, reason} by the rule above (query and criterion are part of the signature, unused)."""
    cjk = [c for c in response if "\u4e00" <= c <= "\u9fff"]
    good = sum(c in GOOD for c in cjk)
    score = max(1, min(10, int(10 * good / len(cjk) + 0.5))) if cjk else 1
    return {"score": score, "reason": f"{good} of {len(cjk)} characters are in the set; score {score}."}


def corpus_text(corpus_dir: str, top_chars: int = 100) -> str:
    """The corpus books joined, keeping only their `top_chars` most frequent CJK characters (ties by code
    point)."""
    parts = []
    for name in sorted(os.listdir(corpus_dir)):
        if name.startswith("pg") and name.endswith(".txt"):
            with open(os.path.join(corpus_dir, name), encoding="utf-8-sig") as f:
                parts.append("".join(f.read().split()))
    if not parts:
        raise InputError("expected pg*.txt books", path=corpus_dir)
    text = "".join(parts)
    counts = collections.Counter(c for c in text if "\u4e00" <= c <= "\u9fff")
    keep = {c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_chars]}
    return "".join(c for c in text if c in keep)


def commonest_chars(corpus_dir: str, count: int = 20) -> str:
    """The corpus's `count` most frequent CJK characters, commonest first (ties by code point)."""
    counts = collections.Counter(corpus_text(corpus_dir, count))
    return "".join(c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def demo_response(rng: np.random.Generator, share: float, length: int = RESPONSE_CHARS) -> str:
    """`length` characters, round(share × length) of them from GOOD and the rest from OTHER, shuffled."""
    good = int(round(share * length))
    chars = [GOOD[i] for i in rng.integers(len(GOOD), size=good)] + \
            [OTHER[i] for i in rng.integers(len(OTHER), size=length - good)]
    return "".join(chars[i] for i in rng.permutation(length))


def short_items(benchmark_path: str, count: int) -> list[tuple[dict, list]]:
    """(query record, criteria) for the `count` English WritingBench queries with the shortest official
    critic prompts (the query once, the criterion twice), each query with all its criteria."""
    recs = [r for _, r in read_jsonl(benchmark_path, required=("index", "lang", "query", "checklist"))
            if r["lang"] == "en"]
    recs.sort(key=lambda r: (len(r["query"]) + 2 * max(len(str(c)) for c in r["checklist"]), r["index"]))
    return [(r, list(r["checklist"])) for r in recs[:count]]


def rule_verdicts(data_dir: str, num_queries: int = 60, per_criterion: int = 4, seed: int = 0) -> list[dict]:
    """Verdict records {query, response, criterion, score, reason, index} from the rule teacher."""
    rng = np.random.default_rng(seed)
    out = []
    for q, criteria in short_items(os.path.join(data_dir, "writingbench", "benchmark_all.jsonl"), num_queries):
        for criterion in criteria:
            for _ in range(per_criterion):
                response = demo_response(rng, SHARES[int(rng.integers(len(SHARES)))])
                out.append({"index": q["index"], "query": q["query"], "response": response, "criterion": criterion,
                            **rule_verdict(q["query"], response, criterion)})
    return out
