"""A built-in length-control prompt set: "write about TOPIC in about N words" with N drawn per prompt.

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


def length_control_prompts(count: int, min_words: int, max_words: int, max_len: MaxLen, seed: int = 0,
                           zh_fraction: float = 0.0) -> list[RolloutPrompt]:
    """`count` prompts with targets uniformly in [min_words, max_words] (rounded to 5), deterministic.

    max_len: every prompt's L_max, or a function of the prompt text (a WordBudget, L_max by language).
    """
    if not 0 < min_words <= max_words:
        raise ValueError(f"expected 0 < min_words <= max_words, got {min_words}, {max_words}")
    rng = np.random.default_rng(seed)
    prompts = []
    for i in range(count):
        target = int(round(rng.uniform(min_words, max_words) / 5) * 5) or 5
        if rng.random() < zh_fraction:
            text = f"请写一篇关于{_TOPICS_ZH[i % len(_TOPICS_ZH)]}的短文，{target}字左右。"
        else:
            text = f"Write a short piece about {_TOPICS_EN[i % len(_TOPICS_EN)]} in about {target} words."
        request = parse_length_request(text)
        lower, upper = length_range_for(request)
        prompts.append(RolloutPrompt(id=f"length-{i}", text=text, lower=lower, upper=upper,
                                     max_len=max_len_for(max_len, text)))
    return prompts
