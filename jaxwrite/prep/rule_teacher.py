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

A second rule, `word-share`, is the same measurement over English words, for a pretrained model with a
byte-level BPE vocabulary (SmolLM2, Qwen2.5): those split each CJK character into two or three byte
tokens that carry little meaning, while a common English word is one token the model already knows.
Its responses are `RESPONSE_WORDS` words, `GOOD_WORDS` (ten vivid-prose adjectives) at the same shares
and `OTHER_WORDS` (ten weak-prose adjectives) for the rest, each word one token after a space in
SmolLM2's vocabulary; score = round(10 × share of the response's words in `GOOD_WORDS`), at least 1.
Rules are chosen by name (`RULES`); `cjk-share` stays the default.
"""
from __future__ import annotations

import collections
import dataclasses
import os
from typing import Callable

import numpy as np

from jaxwrite.common import InputError, read_jsonl

GOOD = "了不一道來的人是我他"     # the Chinese corpus's 10 commonest characters (corpus_text order)
OTHER = "個你有說那去這大上子"    # its 11th..20th commonest, the rest of each demo response
RESPONSE_CHARS = 60
SHARES = (0.2, 0.6, 1.0)
TEACHER = ("rule teacher, not a model: score = round(10 × share of the response's CJK characters in the "
           f"set {GOOD}), at least 1; demo responses are {RESPONSE_CHARS} characters at shares "
           "0.2, 0.6, 1.0, so scores are 2, 6, 10 (three levels of the 1..10 scale)")

GOOD_WORDS = ("vivid", "clear", "precise", "elegant", "lively", "graceful", "rich", "striking", "warm", "engaging")
OTHER_WORDS = ("dull", "vague", "boring", "poor", "flat", "plain", "tedious", "dry", "awkward", "weak")
RESPONSE_WORDS = 30
WORD_TEACHER = ("rule teacher, not a model: score = round(10 × share of the response's words in the set "
                f"{{{', '.join(GOOD_WORDS)}}}), at least 1; demo responses are {RESPONSE_WORDS} words at shares "
                "0.2, 0.6, 1.0, so scores are 2, 6, 10 (three levels of the 1..10 scale)")


def _cjk_chars(response: str) -> list[str]:
    return [c for c in response if "\u4e00" <= c <= "\u9fff"]


def _words(response: str) -> list[str]:
    words = [w.strip(".,;:!?\"'()").lower() for w in response.split()]
    return [w for w in words if w]


def rule_verdict(query: str, response: str, criterion, rule: str = "cjk-share") -> dict:
    """{score, reason} by `rule` (query and criterion are part of the signature, unused)."""
    r = get_rule(rule)
    units = r.units(response)
    good = sum(u in r.good for u in units)
    score = max(1, min(10, int(10 * good / len(units) + 0.5))) if units else 1
    return {"score": score, "reason": f"{good} of {len(units)} {r.unit_name} are in the set; score {score}."}


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


def demo_words(rng: np.random.Generator, share: float, length: int = RESPONSE_WORDS) -> str:
    """`length` words, round(share × length) of them from GOOD_WORDS and the rest from OTHER_WORDS,
    shuffled, as one sentence."""
    good = int(round(share * length))
    words = [GOOD_WORDS[i] for i in rng.integers(len(GOOD_WORDS), size=good)] + \
            [OTHER_WORDS[i] for i in rng.integers(len(OTHER_WORDS), size=length - good)]
    text = " ".join(words[i] for i in rng.permutation(length))
    return text[0].upper() + text[1:] + "."


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule: the units it counts in a response, its good set, and how demo responses are made."""
    units: Callable[[str], list[str]]
    good: frozenset
    unit_name: str
    teacher: str                                                 # the provenance line the critic data carries
    make_response: Callable[[np.random.Generator, float], str]   # (rng, share) -> a demo response


RULES = {"cjk-share": Rule(_cjk_chars, frozenset(GOOD), "characters", TEACHER, demo_response),
         "word-share": Rule(_words, frozenset(GOOD_WORDS), "words", WORD_TEACHER, demo_words)}


def get_rule(name: str) -> Rule:
    """The rule named `name` (a key of RULES)."""
    if name not in RULES:
        raise InputError(f"unknown rule {name!r}: expected one of {', '.join(RULES)}", field="rule")
    return RULES[name]


def teacher_text(rule: str = "cjk-share") -> str:
    """The one-line description of `rule` that the critic data's provenance carries."""
    return get_rule(rule).teacher


def short_items(benchmark_path: str, count: int) -> list[tuple[dict, list]]:
    """(query record, criteria) for the `count` English WritingBench queries with the shortest official
    critic prompts (the query once, the criterion twice), each query with all its criteria."""
    recs = [r for _, r in read_jsonl(benchmark_path, required=("index", "lang", "query", "checklist"))
            if r["lang"] == "en"]
    recs.sort(key=lambda r: (len(r["query"]) + 2 * max(len(str(c)) for c in r["checklist"]), r["index"]))
    return [(r, list(r["checklist"])) for r in recs[:count]]


def rule_verdicts(data_dir: str, num_queries: int = 60, per_criterion: int = 4, seed: int = 0,
                  rule: str = "cjk-share") -> list[dict]:
    """Verdict records {query, response, criterion, score, reason, index} from the rule teacher."""
    make = get_rule(rule).make_response
    rng = np.random.default_rng(seed)
    out = []
    for q, criteria in short_items(os.path.join(data_dir, "writingbench", "benchmark_all.jsonl"), num_queries):
        for criterion in criteria:
            for _ in range(per_criterion):
                response = make(rng, SHARES[int(rng.integers(len(SHARES)))])
                out.append({"index": q["index"], "query": q["query"], "response": response, "criterion": criterion,
                            **rule_verdict(q["query"], response, criterion, rule)})
    return out
