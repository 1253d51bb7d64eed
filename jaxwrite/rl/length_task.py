"""A built-in length-control prompt set: "write about TOPIC in about N words" with N drawn per prompt,
or LongWriter-style ranges ("in A to B words", style "range").

Used by the tiny GRPO recipe and the quickstart, where no curated RL prompt file is at hand. Ranges come
from the same rule-based request parser as real prompt files (jaxwrite.text.parse_length_request), so
the task exercises the production path end to end.
"""
from __future__ import annotations

import numpy as np

from jaxwrite.rl.length import MaxLen, max_len_for
from jaxwrite.rl.types import RolloutPrompt
from jaxwrite.text import length_range_for, parse_length_request

_TOPICS_EN = ("the sea", "a winter morning", "an old letter", "the city at night", "a garden", "a long journey",
              "a friendship", "the first snow", "a lost key", "a quiet library", "the river", "a market day")
_TOPICS_ZH = ("大海", "冬天的早晨", "一封旧信", "夜晚的城市", "花园", "远行", "友情", "初雪")
# Topics no training prompt uses, for held-out evaluation of a trained policy (benchmarks/grpo_real.py).
_HELD_OUT_EN = ("a mountain village", "the last train home", "a rainy afternoon", "an empty theatre",
                "a fisherman", "the school yard", "a birthday", "an abandoned house")
_HELD_OUT_ZH = ("山村", "末班车", "雨天的下午", "生日")
STYLES = ("about", "range")
# A range request spans the target ± this share (rounded to 5): LongWriter-style "500-1000 words"
# requests are wide, and a ±10 % "about" window is narrow for a small model.
_RANGE_HALF_WIDTH = 0.25


def _range(target: int) -> tuple[int, int]:
    lo = max(5, int(round(target * (1 - _RANGE_HALF_WIDTH) / 5) * 5))
    return lo, max(lo + 5, int(round(target * (1 + _RANGE_HALF_WIDTH) / 5) * 5))


def length_control_prompts(count: int, min_words: int, max_words: int, max_len: MaxLen, seed: int = 0,
                           zh_fraction: float = 0.0, style: str = "about",
                           held_out: bool = False) -> list[RolloutPrompt]:
    """`count` prompts with targets uniformly in [min_words, max_words] (rounded to 5), deterministic.

    max_len: every prompt's L_max, or a function of the prompt text (a WordBudget, L_max by language).
    style: "about" N words (range N ± 10 %) or "range" (A to B words around the target, ± 25 %).
    held_out: topics no training prompt has (ids "heldout-i"), for evaluating a trained policy.
    """
    if not 0 < min_words <= max_words:
        raise ValueError(f"expected 0 < min_words <= max_words, got {min_words}, {max_words}")
    if style not in STYLES:
        raise ValueError(f"length task style '{style}': expected one of {', '.join(STYLES)}")
    topics_en, topics_zh = (_HELD_OUT_EN, _HELD_OUT_ZH) if held_out else (_TOPICS_EN, _TOPICS_ZH)
    rng = np.random.default_rng(seed)
    prompts = []
    for i in range(count):
        target = int(round(rng.uniform(min_words, max_words) / 5) * 5) or 5
        lo, hi = _range(target)
        if rng.random() < zh_fraction:
            topic = topics_zh[i % len(topics_zh)]
            text = (f"请写一篇关于{topic}的短文，{lo}到{hi}字。" if style == "range"
                    else f"请写一篇关于{topic}的短文，{target}字左右。")
        else:
            topic = topics_en[i % len(topics_en)]
            text = (f"Write a short piece about {topic} in {lo} to {hi} words." if style == "range"
                    else f"Write a short piece about {topic} in about {target} words.")
        request = parse_length_request(text)
        lower, upper = length_range_for(request)
        prompts.append(RolloutPrompt(id=f"{'heldout' if held_out else 'length'}-{i}", text=text, lower=lower,
                                     upper=upper, max_len=max_len_for(max_len, text)))
    return prompts
