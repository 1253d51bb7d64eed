"""What a GRPO step holds per prompt and per sampled completion."""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

from jaxwrite.infer import FinishReason
from jaxwrite.text import ANSWER_CLOSE, ThinkAnswer, count_words, parse_think_answer

# Only the max_new_tokens cap marks a truncated rollout (a stop string or EOS is a finished one).
FINISH_TRUNCATED = FinishReason.LENGTH


@dataclasses.dataclass(frozen=True)
class RolloutPrompt:
    """One RL prompt with its target answer length in words (LongBench-Write word count).

    `max_len` is L_max of the length reward: the largest answer, in words, the generation cap can
    produce. The engine caps tokens, not words, so L_max = floor(max_new_tokens × words_per_token)
    (`max_words_for_token_cap`), with words_per_token measured for the policy's tokenizer on text
    of the prompt's language (`jaxwrite.rl.length.word_budget`, unless rl.words_per_token fixes one
    figure). It bounds the answer from above because the `<think>` plan shares the same token budget.
    """

    id: str
    text: str
    lower: int
    upper: int
    max_len: int


@dataclasses.dataclass(frozen=True)
class RolloutSample:
    """One sampled completion: the generated text after the prompt (the stop string excluded).

    think_prefilled: the prompt ended with `<think>` (jaxwrite.text.think_answer_base_prompt, the
    base-model protocol), so the text starts inside the plan.
    """

    text: str
    finish_reason: str
    num_tokens: int
    stop_string: str | None = None  # which stop string ended generation, if one did
    think_prefilled: bool = False
    protocol: bool = True   # False: a plain prompt without <think>/<answer>; the whole text is the answer

    @property
    def truncated(self) -> bool:
        return self.finish_reason == FINISH_TRUNCATED

    @functools.cached_property
    def parsed(self) -> ThinkAnswer:
        # Parsed once per sample and shared by every reward and metric that needs the answer.
        if not self.protocol:
            return ThinkAnswer(plan=None, answer=self.text.strip() or None, well_formed=False,
                               problems=["plain template: no <think>/<answer> protocol"])
        closed = self.finish_reason == "stop" and self.stop_string == ANSWER_CLOSE
        return parse_think_answer(self.text, stopped_at_answer_close=closed,
                                  think_prefilled=self.think_prefilled)

    @functools.cached_property
    def answer(self) -> str | None:
        """What a reader sees, by the one extraction rule the scorers use (jaxwrite.text.extract_answer):
        the whole text for a plain prompt; for the protocol, the <answer> block of a well-formed sample
        and None otherwise. A malformed sample has no answer, so the length and writing-RM rewards
        never credit text the scorers would refuse (an unclosed or doubled <answer>)."""
        if not self.protocol:
            return self.parsed.answer
        return self.parsed.answer if self.parsed.well_formed else None

    @functools.cached_property
    def answer_words(self) -> int:
        return count_words(self.answer) if self.answer else 0

    @functools.cached_property
    def think_words(self) -> int:
        plan = self.parsed.plan
        return count_words(plan) if plan else 0


def max_words_for_token_cap(max_new_tokens: int, words_per_token: float) -> int:
    """L_max in words for a generation cap in tokens (see RolloutPrompt)."""
    if max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens: expected a positive integer, got {max_new_tokens}")
    if not words_per_token > 0:
        raise ValueError(f"words_per_token: expected a positive number, got {words_per_token}")
    return int(math.floor(max_new_tokens * words_per_token))


def words_per_token(texts: Sequence[str], token_counts: Sequence[int]) -> float:
    """Words per token over a sample of texts, e.g. rollouts (text, num_tokens) or a corpus."""
    if len(texts) != len(token_counts):
        raise ValueError(f"texts and token_counts differ in length: {len(texts)} vs {len(token_counts)}")
    tokens = int(np.sum(token_counts))
    if tokens <= 0:
        raise ValueError("token_counts: expected a positive total")
    return sum(count_words(t) for t in texts) / tokens
