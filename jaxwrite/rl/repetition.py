"""Repetition penalty for the format reward: repeated n-grams and near-duplicate sentences/paragraphs.

LongWriter-Zero subtracts a repetition penalty from its format reward but publishes no formula;
this one is jaxwrite's own. Text is tokenised so that each Han character is one token and every
other run of letters/digits is one lower-cased word. The n-gram length follows the dominant script
(word n-grams for English-like text, character n-grams for Chinese), because one Han character
carries roughly what a short word fragment does.

Three components, each in [0, 1]:
  ngram      fraction of n-gram positions whose n-gram already occurred earlier in the text;
             natural prose repeats a few stock phrases, so ngram_tolerance is subtracted first and
             the rest rescaled to [0, 1];
  sentences  token share of sentences that near-duplicate an earlier sentence;
  paragraphs token share of lines/paragraphs that near-duplicate an earlier one.
Near-duplicate: Jaccard similarity of the two units' shingle sets (token k-grams after lower-casing
and dropping punctuation) >= near_duplicate_jaccard; normalised exact duplicates have Jaccard 1.
Units shorter than min_unit_tokens are ignored (short dialogue lines legitimately recur).
The penalty is the largest component, so any one kind of looping is enough to be penalised.
The defaults are calibrated so natural prose scores near 0 and pasted paragraphs score high (figures:
docs/BENCHMARKS.md, "Repetition penalty calibration").
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import scipy.sparse

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_HAN}]|[^\W_{_HAN}]+")
_HAN_CHAR = re.compile(rf"[{_HAN}]")
_LATIN_WORD = re.compile(r"\b[a-zA-Z]+\b")
# Sentence ends (with any closing quotes/brackets after them) or line breaks.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？；;…])[\"'”’」』)）]*\s*|\n+")
_LINE_BREAK = re.compile(r"\n+")


@dataclasses.dataclass(frozen=True)
class RepetitionConfig:
    ngram_en: int = 4
    ngram_zh: int = 8
    ngram_tolerance: float = 0.1
    shingle_en: int = 2
    shingle_zh: int = 3
    near_duplicate_jaccard: float = 0.6
    min_unit_tokens_en: int = 5
    min_unit_tokens_zh: int = 10


@dataclasses.dataclass(frozen=True)
class RepetitionReport:
    lang: str  # "en" or "zh": the dominant script, which picks n-gram and shingle sizes
    ngram_repeat_ratio: float  # raw, before the tolerance
    duplicate_sentence_ratio: float
    duplicate_paragraph_ratio: float
    penalty: float


def dominant_script(text: str) -> str:
    """'zh' when Han characters outnumber Latin words (the LongBench-Write counting units), else 'en'."""
    return "zh" if len(_HAN_CHAR.findall(text)) > len(_LATIN_WORD.findall(text)) else "en"


def tokenize(text: str) -> list[str]:
    """Han characters one by one, other letter/digit runs as lower-cased words."""
    return [t.lower() for t in _TOKEN.findall(text)]


def ngram_repeat_ratio(tokens: list[str], n: int) -> float:
    """Fraction of the len−n+1 n-gram positions whose n-gram occurred before; 0 if there are none."""
    total = len(tokens) - n + 1
    if total <= 0:
        return 0.0
    unique = len({tuple(tokens[i:i + n]) for i in range(total)})
    return (total - unique) / total


def near_duplicate_ratio(units: list[list[str]], shingle: int, threshold: float) -> float:
    """Token share of units whose shingle-set Jaccard with some earlier unit is >= threshold."""
    if len(units) < 2:
        return 0.0
    vocab: dict[tuple[str, ...], int] = {}
    rows, cols = [], []
    for r, toks in enumerate(units):
        k = min(shingle, len(toks))
        for c in {tuple(toks[i:i + k]) for i in range(len(toks) - k + 1)}:
            rows.append(r)
            cols.append(vocab.setdefault(c, len(vocab)))
    # [units, shingles] binary incidence; M Mᵀ counts shared shingles for every pair at once.
    incidence = scipy.sparse.csr_matrix(
        (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(units), len(vocab)))
    sizes = np.asarray(incidence.sum(axis=1)).ravel()  # [units]
    shared = scipy.sparse.triu(incidence @ incidence.T, k=1).tocoo()  # pairs i < j
    jaccard = shared.data / (sizes[shared.row] + sizes[shared.col] - shared.data)
    duplicate = np.zeros(len(units), bool)
    duplicate[shared.col[jaccard >= threshold]] = True  # the later unit of each similar pair
    weights = np.array([len(u) for u in units], np.float64)
    return float(weights[duplicate].sum() / weights.sum())


def _units(text: str, splitter: re.Pattern, min_tokens: int) -> list[list[str]]:
    units = (tokenize(piece) for piece in splitter.split(text))
    return [u for u in units if len(u) >= min_tokens]


def repetition_report(text: str, lang: str | None = None,
                      config: RepetitionConfig = RepetitionConfig()) -> RepetitionReport:
    """All components and the penalty; `lang` ('en'/'zh') overrides the script detection."""
    lang = lang or dominant_script(text)
    if lang not in ("en", "zh"):
        raise ValueError(f"lang: expected 'en' or 'zh', got {lang!r}")
    zh = lang == "zh"
    n = config.ngram_zh if zh else config.ngram_en
    shingle = config.shingle_zh if zh else config.shingle_en
    min_tokens = config.min_unit_tokens_zh if zh else config.min_unit_tokens_en
    ngram = ngram_repeat_ratio(tokenize(text), n)
    sentences = near_duplicate_ratio(_units(text, _SENTENCE_BREAK, min_tokens), shingle,
                                     config.near_duplicate_jaccard)
    paragraphs = near_duplicate_ratio(_units(text, _LINE_BREAK, min_tokens), shingle,
                                      config.near_duplicate_jaccard)
    tol = config.ngram_tolerance
    ngram_excess = min(1.0, max(0.0, (ngram - tol) / (1.0 - tol)))
    return RepetitionReport(lang=lang, ngram_repeat_ratio=ngram, duplicate_sentence_ratio=sentences,
                            duplicate_paragraph_ratio=paragraphs,
                            penalty=max(ngram_excess, sentences, paragraphs))


def repetition_penalty(text: str, lang: str | None = None,
                       config: RepetitionConfig = RepetitionConfig()) -> float:
    """Repetition penalty in [0, 1] (0 = no repetition); see the module docstring."""
    return repetition_report(text, lang, config).penalty
