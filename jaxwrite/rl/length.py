"""LongWriter-Zero length reward on the answer's word count (arXiv:2506.18841), and its L_max per language.

L_max is the longest answer, in words, the generation cap allows. The cap is in tokens and words per
token depend on the tokenizer and the language: a LongBench-Write "word" is an English word or one
Han character, and a tokenizer may spend two tokens on an English word but cover two Han characters
with one token (or three byte tokens per character without Chinese in its vocabulary). So each
language gets its own words-per-token figure, measured on sample prose with the policy's tokenizer.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Mapping, Sequence, Union

from jaxwrite.rl.repetition import dominant_script
from jaxwrite.rl.types import max_words_for_token_cap, words_per_token

log = logging.getLogger(__name__)

# An L_max for every prompt (int) or one per prompt text (a WordBudget).
MaxLen = Union[int, Callable[[str], int]]

# Sample prose for measuring words per token: written for this purpose, essay-like, with ordinary
# punctuation, numbers and paragraph breaks, since those cost tokens but count no words.
SAMPLE_PROSE: Mapping[str, tuple[str, ...]] = {
    "en": (
        "The harbour wakes before the town does. By five o'clock the first boats are already sliding out "
        "past the breakwater, their engines a low hum under the gulls, and the fish market is washing down "
        "its stone floor for the day's trade. Nobody hurries, yet everything is ready by seven.",
        "My grandmother kept a notebook for every year of her working life. The entries were short: the "
        "weather, the price of bread, who had called, what the garden needed. Read one at a time they are "
        "dull; read together, forty years of them, they become a history of a village that no historian "
        "thought worth writing.",
        "There are three reasons to plan an essay before writing it. First, a plan shows whether the "
        "argument holds together at all. Second, it tells you how long each part deserves to be, so the "
        "introduction does not swallow the page. Third, and most often forgotten, it lets you write the "
        "ending first, which is the surest way to know where you are going.",
        "\"Are you sure this is the right road?\" she asked, folding the map against the wind. He was not "
        "sure, but the river was still on their left, the hills were where they should be, and in 1987 "
        "that had been enough to find the cottage.",
    ),
    "zh": (
        "清晨的港口比小镇醒得早。五点钟，第一批渔船已经驶出防波堤，发动机的声音低低地压在海鸥的叫声下面，"
        "鱼市的石板地也在冲洗，准备迎接一天的买卖。没有人着急，可到了七点，一切都已经就绪。",
        "外婆一辈子都有记账的习惯。每一年一个本子，记的都是些琐事：天气怎样，米价多少，谁来串过门，"
        "菜园里该种什么。一页一页地看，实在平淡；可四十年的本子摆在一起，就成了一部没有人想过要写的村史。",
        "写文章之前先列提纲，至少有三个好处。第一，提纲能检验论证是否站得住脚；第二，它能提醒你每一部分"
        "该写多长，免得开头就占去大半篇幅；第三，也是最容易被忽略的一点，它让你先想好结尾，而知道要去哪里，"
        "正是不迷路的最好办法。",
        "“你确定是这条路吗？”她一边问，一边顶着风把地图折好。他并不确定，但河还在左手边，山也在该在的地方，"
        "1987年的时候，凭这些就足以找到那间小屋了。",
    ),
}
LANGS = tuple(SAMPLE_PROSE)


def length_reward(n_words: int, lower: int, upper: int, max_len: int) -> float:
    """1 inside [lower, upper]; n/lower below; (max_len − n)/(max_len − upper) above, clipped at 0.

    `max_len` is L_max, the longest answer the generation cap allows (words). When
    max_len <= upper there is no room for a decay ramp, so any answer above `upper` scores 0.
    """
    if n_words < 0:
        raise ValueError(f"n_words: expected >= 0, got {n_words}")
    if lower <= 0:
        raise ValueError(f"lower: expected a positive word count, got {lower}")
    if upper < lower:
        raise ValueError(f"upper: expected >= lower ({lower}), got {upper}")
    if max_len <= 0:
        raise ValueError(f"max_len: expected a positive word count, got {max_len}")
    if n_words < lower:
        return n_words / lower
    if n_words <= upper:
        return 1.0
    if max_len <= upper:
        return 0.0
    return max(0.0, (max_len - n_words) / (max_len - upper))


def measure_words_per_token(tokenizer, samples: Mapping[str, Sequence[str]] = SAMPLE_PROSE) -> dict[str, float]:
    """Words (LongBench-Write count) per token of `tokenizer` on sample prose of each language."""
    return {lang: words_per_token(texts, [len(tokenizer.encode(t)) for t in texts])
            for lang, texts in samples.items()}


@dataclasses.dataclass(frozen=True)
class WordBudget:
    """L_max per language for a generation cap; calling it with a prompt text gives that prompt's L_max.

    lang: "auto" picks the prompt's dominant script (as the rollout template does), "en"/"zh" fixes it.
    """

    max_new_tokens: int
    ratios: Mapping[str, float]   # words per token, per language
    lang: str = "auto"
    measured: bool = True         # ratios come from the tokenizer, not an override

    def lang_of(self, text: str) -> str:
        return dominant_script(text) if self.lang == "auto" else self.lang

    def for_lang(self, lang: str) -> int:
        if lang not in self.ratios:
            raise ValueError(f"no words-per-token figure for language {lang!r}; have {sorted(self.ratios)}")
        return max_words_for_token_cap(self.max_new_tokens, self.ratios[lang])

    def __call__(self, text: str) -> int:
        return self.for_lang(self.lang_of(text))

    def describe(self) -> str:
        source = "measured on the policy tokenizer" if self.measured else "rl.words_per_token override"
        parts = ", ".join(f"{lang} {r:.3f} words/token -> L_max {self.for_lang(lang)}"
                          for lang, r in sorted(self.ratios.items()))
        return f"{parts} ({source}, {self.max_new_tokens} new tokens)"


def word_budget(tokenizer, max_new_tokens: int, words_per_token: float | str = 0.0,
                lang: str = "auto") -> WordBudget:
    """L_max per language: measured with `tokenizer` (words_per_token 0 or "auto"), else one figure for all."""
    if isinstance(words_per_token, str):
        if words_per_token != "auto":
            raise ValueError(f"words_per_token: expected a number or 'auto', got {words_per_token!r}")
        words_per_token = 0.0
    if words_per_token < 0:
        raise ValueError(f"words_per_token: expected 0 (measure) or a positive number, got {words_per_token}")
    if words_per_token > 0:
        ratios, measured = {code: float(words_per_token) for code in LANGS}, False
    else:
        ratios, measured = measure_words_per_token(tokenizer), True
    budget = WordBudget(int(max_new_tokens), ratios, lang, measured)
    if lang != "auto":
        budget.for_lang(lang)   # an unknown fixed language fails here, not at the first prompt
    return budget


def max_len_for(max_len: MaxLen, text: str) -> int:
    """The L_max of one prompt: a fixed int, or the budget's figure for the prompt's language."""
    value = max_len(text) if callable(max_len) else max_len
    if value <= 0:
        raise ValueError(f"max_len: expected a positive word count, got {value}")
    return int(value)
