"""Synthetic preference pairs a tiny reward model can learn: an original corpus passage (chosen) against
the same passage degraded (rejected), for checking that Bradley–Terry training works at small scale.

These pairs are SYNTHETIC and say nothing about writing quality as people judge it; report them as
such, beside the WritingPreferenceBench row (data_pipelines.preferences).

Passages: each book is cleaned with `clean_files`, whitespace is normalised (en: single spaces; zh:
none, since the Gutenberg zh texts are hard-wrapped mid-sentence), split into sentences (en: after
. ! ? and closing quotes; zh: after 。！？ and closing quotes), and cut into non-overlapping runs of
consecutive sentences whose joined length falls in `passage_chars[language]`.

Degradations (the pair's `degradation` field):
  shuffle   the sentences in another order                      (same length)
  scramble  the words (en) / characters (zh) inside each sentence shuffled  (same length)
  repeat    one sentence repeated 2-3 more times in a row       (rejected longer)
  truncate  cut mid-sentence at 35-70% of the passage           (rejected shorter)
Kinds go round-robin over each book's passages, so repeat and truncate are equally common and the
length-only baseline ("prefer the longer") sits near 0.5 over the whole set.

Split: whole BOOKS are held out (per corpus folder, a seeded `eval_fraction` of its books, at least
one), so no held-out passage, and no other passage of its book, is seen in training.
Everything is seeded: the same arguments give the same pairs, in the same order.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import zlib

import numpy as np

from data_pipelines.cleaning import clean_files
from data_pipelines.preferences import PreferencePair, length_baseline_accuracy
from data_pipelines.sources import corpus_files
from jaxwrite.common import InputError

KINDS = ("shuffle", "scramble", "repeat", "truncate")
DEFAULT_PASSAGE_CHARS = {"en": (150, 300), "zh": (60, 110)}
PROMPTS = {
    "en": ("Write a passage of narrative prose.", "Continue the story in a few sentences.",
           "Write a short literary passage."),
    "zh": ("寫一段敘事文字。", "續寫這個故事的一段。", "寫一段文學作品的段落。"),
}
# A sentence ends at its terminal mark plus any closing quotes/brackets/italics right after it.
_EN_SENTENCE = re.compile(r"([.!?][”’\"')\]_]*)\s+(?=[“‘\"'(\[_]?[A-Z])")
_ZH_SENTENCE = re.compile(r"(?<=[。！？])[」』”’）]*")
_EN_ABBREVIATIONS = ("Mr.", "Mrs.", "Dr.", "St.", "Mme.", "Messrs.", "Capt.", "Col.", "Gen.", "Rev.", "Mt.")
_ENDINGS = ".!?。！？」』”’\"')）]_"


@dataclasses.dataclass(frozen=True)
class DegradedPair(PreferencePair):
    """A PreferencePair (question_id = passage id, scores 1/0) that records how `rejected` was made."""
    degradation: str
    language: str
    book: str


def language_of(corpus: str) -> str:
    """'en' or 'zh' from a corpus folder name ending in _en / _zh (corpus_en, corpus_zh)."""
    lang = os.path.basename(os.path.normpath(corpus)).rsplit("_", 1)[-1]
    if lang not in DEFAULT_PASSAGE_CHARS:
        raise InputError(f"expected a corpus folder named *_en or *_zh, got {corpus!r}", field="corpora")
    return lang


def normalize(text: str, language: str) -> str:
    return re.sub(r"\s+", "", text) if language == "zh" else re.sub(r"\s+", " ", text).strip()


def join_sentences(sentences: list[str], language: str) -> str:
    return ("" if language == "zh" else " ").join(sentences)


def split_sentences(text: str, language: str) -> list[str]:
    """Sentences of normalised text; en keeps common abbreviations (Mr. Darcy) inside their sentence."""
    if language == "zh":
        pieces, start = [], 0
        for m in _ZH_SENTENCE.finditer(text):
            if m.end() > start:
                pieces.append(text[start:m.end()])
                start = m.end()
        pieces.append(text[start:])
        return [p for p in pieces if p]
    out: list[str] = []
    for piece in _EN_SENTENCE.sub(lambda m: m.group(1) + "\0", text).split("\0"):
        piece = piece.strip()
        if out and out[-1].endswith(_EN_ABBREVIATIONS):
            out[-1] = f"{out[-1]} {piece}"
        elif piece:
            out.append(piece)
    return out


def _clean_sentence(sentence: str, language: str) -> bool:
    """Prose sentences only: no headings, numbers, brackets or licence text (they make odd passages)."""
    if language == "zh":
        return len(sentence) >= 4 and sentence[-1] in _ENDINGS and not re.search(r"[\[\]*#0-9A-Za-z]", sentence)
    words = sentence.split()
    return (len(words) >= 3 and sentence[-1] in _ENDINGS and not re.search(r"[\[\]*#0-9]|Gutenberg", sentence)
            and not any(len(w) >= 4 and w.isupper() for w in words))


def passages(text: str, language: str, min_chars: int, max_chars: int, min_sentences: int = 3) -> list[list[str]]:
    """Non-overlapping runs of consecutive clean sentences joined to min_chars..max_chars characters."""
    sentences = split_sentences(normalize(text, language), language)
    sep = 0 if language == "zh" else 1
    out, i = [], 0
    while i < len(sentences):
        j, total = i, -sep
        while j < len(sentences) and total < min_chars and _clean_sentence(sentences[j], language):
            total += len(sentences[j]) + sep
            j += 1
        if min_chars <= total <= max_chars and j - i >= min_sentences:
            out.append(sentences[i:j])
            i = j
        else:
            i += 1
    return out


def _shuffle(sentences, language, rng):
    order = rng.permutation(len(sentences))
    if (order == np.arange(len(sentences))).all():
        order = np.roll(order, 1)   # a permutation that moves every sentence
    return join_sentences([sentences[k] for k in order], language)


def _scramble(sentences, language, rng):
    out = list(sentences)
    for k in range(len(out)):
        body = out[k].rstrip(_ENDINGS)
        end = out[k][len(body):]
        units = list(body) if language == "zh" else body.split()
        if len(units) < 3:
            continue
        order = rng.permutation(len(units))
        if (order == np.arange(len(units))).all():
            order = np.roll(order, 1)
        out[k] = ("" if language == "zh" else " ").join(units[o] for o in order) + end
    return join_sentences(out, language)


def _repeat(sentences, language, rng):
    k, extra = int(rng.integers(len(sentences))), int(rng.integers(2, 4))
    return join_sentences(sentences[:k + 1] + [sentences[k]] * extra + sentences[k + 1:], language)


def _truncate(sentences, language, rng):
    text = join_sentences(sentences, language)
    cut = int(len(text) * rng.uniform(0.35, 0.7))
    step = (lambda c: text.rfind(" ", 0, c)) if language == "en" else (lambda c: c - 1)
    if language == "en":
        cut = step(cut + 1)   # at a word boundary
    # Never stop at a sentence end: the cut must be visibly mid-sentence.
    while cut > 0 and text[:cut].rstrip()[-1:] in tuple(_ENDINGS):
        cut = step(cut)
    return text[:cut].rstrip() if cut > 0 else ""


DEGRADE = {"shuffle": _shuffle, "scramble": _scramble, "repeat": _repeat, "truncate": _truncate}


def degrade(sentences: list[str], kind: str, language: str, rng: np.random.Generator) -> str:
    """The degraded copy of a passage (its sentences) made by `kind`; may equal the original if it cannot."""
    if kind not in DEGRADE:
        raise InputError(f"unknown degradation {kind!r}; expected one of {KINDS}", field="degradations")
    return DEGRADE[kind](list(sentences), language, rng)


def _book_rng(seed: int, book: str) -> np.random.Generator:
    # Seeded per book, so one book's pairs do not change when other books are added or removed.
    return np.random.default_rng([seed, zlib.crc32(book.encode("utf-8"))])


def book_pairs(path: str, language: str, kinds=KINDS, passages_per_book: int = 200, seed: int = 0,
               passage_chars: tuple[int, int] | None = None) -> list[DegradedPair]:
    """Up to `passages_per_book` pairs from one book: a seeded sample of its passages, kinds round-robin."""
    kinds = tuple(kinds)
    for k in kinds:
        if k not in DEGRADE:
            raise InputError(f"unknown degradation {k!r}; expected some of {KINDS}", field="degradations")
    lo, hi = passage_chars or DEFAULT_PASSAGE_CHARS[language]
    docs, _ = clean_files([path])
    book = os.path.splitext(os.path.basename(path))[0]
    candidates = [(doc_id, n, p) for doc_id, text in docs for n, p in enumerate(passages(text, language, lo, hi))]
    rng = _book_rng(seed, book)
    offset = int(rng.integers(len(kinds)))
    pairs: list[DegradedPair] = []
    for idx in rng.permutation(len(candidates)):
        if len(pairs) >= passages_per_book:
            break
        doc_id, n, sentences = candidates[idx]
        kind = kinds[(len(pairs) + offset) % len(kinds)]
        original, rejected = join_sentences(sentences, language), degrade(sentences, kind, language, rng)
        if not rejected or rejected == original:
            continue   # e.g. a truncation with no mid-sentence cut point; the kind goes to the next passage
        prompt = PROMPTS[language][int(rng.integers(len(PROMPTS[language])))]
        pairs.append(DegradedPair(f"{doc_id}#{n}", prompt, original, rejected, 1.0, 0.0, "original",
                                  f"degraded:{kind}", kind, language, book))
    return pairs


def build_degraded_pairs(data_dir: str, corpora=("corpus_en", "corpus_zh"), kinds=KINDS,
                         passages_per_book: int = 200, eval_fraction: float = 0.2, seed: int = 0,
                         passage_chars: dict[str, tuple[int, int]] | None = None
                         ) -> tuple[list[DegradedPair], list[DegradedPair], dict]:
    """(train, eval, stats) from the corpus folders under `data_dir`; eval holds out whole books."""
    if not 0.0 < eval_fraction < 1.0:
        raise InputError(f"eval_fraction must be in (0, 1), got {eval_fraction}", field="eval_fraction")
    train: list[DegradedPair] = []
    held: list[DegradedPair] = []
    eval_books: list[str] = []
    for corpus in corpora:
        language = language_of(corpus)
        files = corpus_files(os.path.join(data_dir, corpus))
        if len(files) < 2:
            raise InputError(f"need at least 2 books to hold one out, found {len(files)}",
                             path=os.path.join(data_dir, corpus))
        order = np.random.default_rng([seed, zlib.crc32(corpus.encode("utf-8"))]).permutation(len(files))
        n_eval = min(len(files) - 1, max(1, round(eval_fraction * len(files))))
        held_files = {files[i] for i in order[:n_eval]}
        eval_books += sorted(f"{corpus}/{os.path.basename(f)}" for f in held_files)
        chars = (passage_chars or {}).get(language)
        for path in files:
            pairs = book_pairs(path, language, kinds, passages_per_book, seed, chars)
            (held if path in held_files else train).extend(pairs)
    if not train or not held:
        raise InputError(f"no passages found ({len(train)} train, {len(held)} eval pairs)", path=data_dir,
                         field="corpora")
    return train, held, {"synthetic": True, "eval_books": eval_books, "train": pair_stats(train),
                         "eval": pair_stats(held)}


def pair_stats(pairs: list[DegradedPair]) -> dict:
    """Counts and the length-only baseline, overall and per degradation kind and language."""
    by_kind = collections.defaultdict(list)
    for p in pairs:
        by_kind[p.degradation].append(p)
    return {"pairs": len(pairs), "passages": len({p.question_id for p in pairs}),
            "books": len({p.book for p in pairs}),
            "languages": dict(collections.Counter(p.language for p in pairs)),
            "length_baseline_accuracy": length_baseline_accuracy(pairs),
            "by_degradation": {k: {"pairs": len(v), "length_baseline_accuracy": length_baseline_accuracy(v)}
                               for k, v in sorted(by_kind.items())}}


def swap_labels(pairs: list[PreferencePair], fraction: float, seed: int) -> list[PreferencePair]:
    """A control: a seeded `fraction` of pairs with chosen and rejected exchanged (0.5 = labels carry nothing)."""
    if not 0.0 <= fraction <= 1.0:
        raise InputError(f"expected a fraction in [0, 1], got {fraction}", field="data.train_label_swap")
    flip = np.random.default_rng(seed).random(len(pairs)) < fraction
    return [dataclasses.replace(p, chosen=p.rejected, rejected=p.chosen, chosen_score=p.rejected_score,
                                rejected_score=p.chosen_score, chosen_model=p.rejected_model,
                                rejected_model=p.chosen_model) if f else p for p, f in zip(pairs, flip)]
