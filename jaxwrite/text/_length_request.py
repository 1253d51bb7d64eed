"""Explicit length requests in writing prompts ("about 3,000 words", "不少于800字") and the target
word ranges GRPO's length reward uses.

Rules (jaxwrite's own; the LongWriter-Zero paper predicts ranges with a strong model instead):
  about N (also a bare "N words"/"N字")  -> [round(N(1-tol)), round(N(1+tol))]; tol=0.1 gives
                                           3,000 -> [2700, 3300], the paper's example
  at least N ("no less than", "N字以上")  -> [N, round(N(1+margin))], margin=0.3
  at most N ("within", "N字以内")         -> [round(N(1-margin)), N]
  between N and M ("N-M words", "N到M字") -> [N, M]
When a prompt holds several requests, one introduced by a length keyword (字数, 篇幅, word count,
length) wins, then one that covers the whole text over a per-part one ("每篇400字"), then the
earliest.
"""
from __future__ import annotations

import dataclasses
import re

from jaxwrite.text._zh_numerals import ZH_NUMERAL_CHARS, parse_zh_numeral

KINDS = ("about", "at_least", "at_most", "between")


@dataclasses.dataclass(frozen=True)
class LengthRequest:
    """A length the prompt asks for. `low == high` except for "between"; `unit` is "words" or
    "characters" (Chinese 字, which `count_words` counts one each); `per_part` marks a length for
    each of several pieces ("每篇400字", "each 500 words"); `span` is the matched prompt text."""

    kind: str
    low: int
    high: int
    unit: str
    span: str
    per_part: bool = False


# --- numbers ------------------------------------------------------------------------------

_ARABIC = r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s*[kK万千](?![a-zA-Z]))?"
# Two characters at least: single ones are idioms far more often than lengths (十字, 八字, 千字文).
_ZH = rf"(?<![{ZH_NUMERAL_CHARS}])[{ZH_NUMERAL_CHARS}]{{2,}}"
_NUM = rf"(?:{_ARABIC}|{_ZH})"
_MULTIPLIERS = {"k": 1000, "K": 1000, "千": 1000, "万": 10000}


def _number(text: str) -> int:
    text = text.strip()
    if text[0] in ZH_NUMERAL_CHARS:
        return parse_zh_numeral(text)
    scale = _MULTIPLIERS.get(text[-1], 1)
    if scale != 1:
        text = text[:-1].strip()
    return round(float(text.replace(",", "")) * scale)


# --- modifiers ----------------------------------------------------------------------------

_EN_PREFIX = {
    "at_least": ["at least", "no less than", "not less than", "no fewer than", "not fewer than", "a minimum of",
                 "minimum of", "minimum", "more than", "over", "upwards of", "in excess of", "greater than"],
    "at_most": ["at most", "no more than", "not more than", "not exceeding", "not to exceed", "no longer than",
                "up to", "under", "less than", "fewer than", "within", "a maximum of", "maximum of", "maximum",
                "below"],
    "about": ["about", "around", "approximately", "approx.", "roughly", "circa", "some", "nearly", "almost",
              "close to", "exactly", "~"],
}
_EN_SUFFIX = {"at_least": ["or more", "or longer", "or above", "minimum", "at least", "at minimum"],
              "at_most": ["or less", "or fewer", "or under", "maximum", "max", "at most", "at maximum"],
              "about": ["or so"]}
_ZH_PREFIX = {"at_least": ["不少于", "不低于", "不小于", "不下于", "至少", "最少", "起码", "多于", "超过", "大于",
                           "高于"],
              "at_most": ["不超过", "不多于", "不高于", "不大于", "最多", "至多", "少于", "低于", "小于"],
              "about": ["大约", "大概", "大致", "差不多", "接近", "约"]}
_ZH_SUFFIX = {"at_least": ["及以上", "或以上", "以上", "之上", "起"],
              "at_most": ["及以下", "或以下", "以内", "以下", "之内", "内"],
              "about": ["左右", "上下", "前后"]}


def _alternation(table: dict[str, list[str]], group: str) -> str:
    words = sorted((w for ws in table.values() for w in ws), key=len, reverse=True)
    return rf"(?P<{group}>{'|'.join(re.escape(w) for w in words)})"


def _kind_of(table: dict[str, list[str]], word: str | None) -> str | None:
    if word is None:
        return None
    word = word.lower()
    return next(kind for kind, words in table.items() if word in words)


_DASH = r"(?:-|–|—|~|～|－|to|到|至)"
_EN_UNIT = r"[- ]?words?\b"
_ZH_UNIT = r"(?:个)?(?:字|词|单词)(?![节母体幕])"
_EN_COUNT_CUE = r"word[- ]?(?:count|limit)\s*(?:of|:|is|should be|must be)?\s*"
_EN_CUE = rf"(?:{_EN_COUNT_CUE}|length\s*(?:of|:|is|should be|must be)?\s*)"
_ZH_CUE = r"(?:字数|篇幅|长度)(?:要求|限制|控制在|应在|在|为|是|：|:|\s)*"

_PATTERNS: list[tuple[str, re.Pattern]] = [
    # ranges first: their numbers are masked before single numbers are searched
    ("between", re.compile(rf"between\s+(?P<n1>{_NUM})(?:{_EN_UNIT})?\s+and\s+(?P<n2>{_NUM}){_EN_UNIT}", re.I)),
    ("between", re.compile(rf"(?:from\s+)?(?P<n1>{_NUM})(?:{_EN_UNIT})?\s*{_DASH}\s*(?P<n2>{_NUM}){_EN_UNIT}", re.I)),
    ("between", re.compile(rf"(?P<n1>{_NUM})\s*(?:{_ZH_UNIT})?\s*{_DASH}\s*(?P<n2>{_NUM})\s*{_ZH_UNIT}")),
    ("between", re.compile(rf"{_ZH_CUE}(?P<n1>{_NUM})\s*{_DASH}\s*(?P<n2>{_NUM})")),
    ("words", re.compile(rf"(?P<cue>{_EN_CUE})?(?:{_alternation(_EN_PREFIX, 'pre')}\s+(?:of\s+)?)?"
                         rf"(?P<n1>{_NUM})\s*(?P<plus>\+)?{_EN_UNIT}(?:\s*,?\s*{_alternation(_EN_SUFFIX, 'post')}\b)?",
                         re.I)),
    # after "word count"/"word limit" the unit may be left out: "Word count: 1200"
    ("words", re.compile(rf"(?P<cue>{_EN_COUNT_CUE})(?:{_alternation(_EN_PREFIX, 'pre')}\s+(?:of\s+)?)?"
                         rf"(?P<n1>{_NUM})(?P<plus>\+)?(?:{_EN_UNIT})?"
                         rf"(?:\s*,?\s*{_alternation(_EN_SUFFIX, 'post')}\b)?",
                         re.I)),
    ("characters", re.compile(rf"(?P<cue>{_ZH_CUE})?{_alternation(_ZH_PREFIX, 'pre')}?\s*(?P<n1>{_NUM})\s*"
                              rf"(?P<plus>\+)?{_ZH_UNIT}{_alternation(_ZH_SUFFIX, 'post')}?")),
    # after a 字数 cue the unit may be left out: "字数要求：2000左右"
    ("characters", re.compile(rf"(?P<cue>{_ZH_CUE}){_alternation(_ZH_PREFIX, 'pre')}?\s*(?P<n1>{_NUM})"
                              rf"{_alternation(_ZH_SUFFIX, 'post')}?")),
]

_PER_PART = re.compile(r"(?:每|各)[^，。；,.;\d]{0,4}$|\b(?:each|per|every)\b[^,.;\d]{0,20}$", re.I)
_ZH_CHARS = re.compile(r"[\u4e00-\u9fff]")


def _candidates(prompt: str) -> list[tuple[int, bool, LengthRequest]]:
    masked = prompt
    found = []
    for label, pattern in _PATTERNS:
        for m in pattern.finditer(masked):
            n1 = _number(m.group("n1"))
            if label == "between":
                n2 = _number(m.group("n2"))
                kind, low, high = "between", min(n1, n2), max(n1, n2)
                unit = "characters" if _ZH_CHARS.search(m.group(0)) else "words"
                cued = False
            else:
                table_pre, table_post = (_EN_PREFIX, _EN_SUFFIX) if label == "words" else (_ZH_PREFIX, _ZH_SUFFIX)
                limit = bool(m.group("cue")) and "limit" in m.group("cue").lower()  # a word limit is a maximum
                kind = (_kind_of(table_pre, m.group("pre")) or _kind_of(table_post, m.group("post"))
                        or ("at_least" if m.group("plus") else "at_most" if limit else "about"))
                low = high = n1
                unit = "characters" if label == "characters" and "词" not in m.group(0) else "words"
                cued = bool(m.group("cue"))
            if low <= 0:
                continue
            per_part = bool(_PER_PART.search(prompt[max(0, m.start() - 24):m.start()]))
            found.append((m.start(), cued, LengthRequest(kind, low, high, unit, m.group(0).strip(), per_part)))
            masked = masked[:m.start()] + " " * (m.end() - m.start()) + masked[m.end():]
    return found


def parse_length_request(prompt: str) -> LengthRequest | None:
    """The explicit length request in `prompt`, or None (see the module docstring for the choice
    among several)."""
    found = _candidates(prompt)
    if not found:
        return None
    found.sort(key=lambda item: (not item[1], item[2].per_part, item[0]))
    return found[0][2]


def length_range_for(request: LengthRequest, tolerance: float = 0.1, open_margin: float = 0.3) -> tuple[int, int]:
    """Target [lower, upper] word counts for a request (rules in the module docstring)."""
    if not 0 <= tolerance < 1 or not 0 <= open_margin < 1:
        raise ValueError(f"tolerance {tolerance} and open_margin {open_margin} must lie in [0, 1)")
    if request.kind == "about":
        return round(request.low * (1 - tolerance)), round(request.high * (1 + tolerance))
    if request.kind == "at_least":
        return request.low, round(request.low * (1 + open_margin))
    if request.kind == "at_most":
        return round(request.high * (1 - open_margin)), request.high
    if request.kind == "between":
        return request.low, request.high
    raise ValueError(f"length request kind '{request.kind}': expected one of {', '.join(KINDS)}")
