"""LongWriter-Zero rewards by name: length, format (+ repetition penalty) and the writing RM.

Every reward is a batched function `(prompts, samples) -> np.ndarray [n]` (prompts[i] is the
prompt samples[i] answered), so the reward model scores a whole step in one call and the cheap
per-sample rewards wrap trivially. REWARDS maps a name to a factory `(**options) -> reward`;
a recipe lists names and `make_reward` builds them. Values are raw (un-normalised); the group
normalisation belongs to the advantage estimator.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from jaxwrite.common import Registry
from jaxwrite.rl.length import length_reward
from jaxwrite.rl.repetition import RepetitionConfig, repetition_penalty
from jaxwrite.rl.types import RolloutPrompt, RolloutSample

BatchedReward = Callable[[Sequence[RolloutPrompt], Sequence[RolloutSample]], np.ndarray]
PerSampleReward = Callable[[RolloutPrompt, RolloutSample], float]
# (prompt text, answer text) pairs -> one Bradley–Terry score each.
RMScoreFn = Callable[[list[tuple[str, str]]], Sequence[float]]

REWARDS: Registry[Callable[..., BatchedReward]] = Registry("reward")


def batched(fn: PerSampleReward) -> BatchedReward:
    """Lifts a per-sample reward to the batched form."""
    def reward(prompts: Sequence[RolloutPrompt], samples: Sequence[RolloutSample]) -> np.ndarray:
        _check_pairs(prompts, samples)
        return np.array([fn(p, s) for p, s in zip(prompts, samples)], np.float64)  # [n]
    reward.__name__ = getattr(fn, "__name__", "reward")
    return reward


def _check_pairs(prompts: Sequence, samples: Sequence) -> None:
    if len(prompts) != len(samples):
        raise ValueError(f"prompts and samples differ in length: {len(prompts)} vs {len(samples)}")


def answer_length_reward(prompt: RolloutPrompt, sample: RolloutSample) -> float:
    """length_reward on the answer's word count; a sample without an answer counts 0 words."""
    return length_reward(sample.answer_words, prompt.lower, prompt.upper, prompt.max_len)


def format_reward(prompt: RolloutPrompt, sample: RolloutSample,
                  repetition: RepetitionConfig = RepetitionConfig()) -> float:
    """1 for exactly one <think>…</think> then exactly one <answer>…</answer>, else 0; minus the
    repetition penalty in [0, 1], so the reward lies in [−1, 1].

    The penalty is measured on the answer (what the reader sees) or, when the parser found no
    answer, on the whole completion, since a loop is what usually eats the token budget.
    """
    parsed = sample.parsed
    structure = 1.0 if parsed.well_formed else 0.0
    return structure - repetition_penalty(parsed.answer or sample.text, config=repetition)


@REWARDS.register("length")
def _length(**options) -> BatchedReward:
    _no_options("length", options)
    return batched(answer_length_reward)


@REWARDS.register("format")
def _format(repetition: RepetitionConfig = RepetitionConfig(), **options) -> BatchedReward:
    _no_options("format", options)
    return batched(lambda p, s: format_reward(p, s, repetition))


@REWARDS.register("writing_rm")
def make_rm_reward(score_fn: RMScoreFn | None = None, **options) -> BatchedReward:
    """Bradley–Terry writing reward: score_fn sees (prompt text, answer) for the whole batch.

    The RM judges what a reader would see, the answer alone. A sample with no answer (malformed, by
    the scorers' extraction rule) is not shown to the RM: it takes the lowest score of the batch's
    answers, so it never outranks a real answer, as it earns no length reward either. (Scoring it as
    an empty answer let the RM's own scale decide, and a small RM ranks an empty answer above much
    babble, which pulled the writing reward against the format reward.) A batch without any answer
    scores 0 throughout: no signal, not an invented one.
    """
    _no_options("writing_rm", options)
    if score_fn is None:
        raise ValueError("reward 'writing_rm': expected score_fn, the batched reward-model scorer")

    def writing_rm(prompts: Sequence[RolloutPrompt], samples: Sequence[RolloutSample]) -> np.ndarray:
        _check_pairs(prompts, samples)
        answered = [i for i, s in enumerate(samples) if s.answer]
        scores = np.zeros(len(samples), np.float64)  # [n]
        if not answered:
            return scores
        got = np.asarray(score_fn([(prompts[i].text, samples[i].answer) for i in answered]), np.float64)
        if got.shape != (len(answered),):
            raise ValueError(f"writing_rm score_fn: expected {len(answered)} scores, got shape {got.shape}")
        if not np.all(np.isfinite(got)):
            raise ValueError("writing_rm score_fn: returned a non-finite score")
        scores[:] = got.min()
        scores[answered] = got
        return scores
    return writing_rm


def _no_options(name: str, options: dict) -> None:
    if options:
        raise ValueError(f"reward '{name}': unexpected options {sorted(options)}")


def make_reward(name: str, **options) -> BatchedReward:
    """Builds the named reward (e.g. make_reward('writing_rm', score_fn=rm))."""
    return REWARDS.get(name)(**options)


def score_groups(rewards: Mapping[str, BatchedReward], prompts: Sequence[RolloutPrompt],
                 groups: Sequence[Sequence[RolloutSample]]) -> np.ndarray:
    """Scores G samples per prompt with every reward, each in one batched call.

    groups[p] holds the samples of prompts[p], all groups the same size. Returns raw rewards
    [num_prompts, group_size, num_rewards] in the order of `rewards`, ready for group_advantages.
    """
    if not rewards:
        raise ValueError("rewards: expected at least one reward")
    _check_pairs(prompts, groups)
    sizes = {len(g) for g in groups}
    if len(sizes) > 1:
        raise ValueError(f"groups: expected equal group sizes, got {sorted(sizes)}")
    group_size = sizes.pop() if sizes else 0
    flat_prompts = [p for p, g in zip(prompts, groups) for _ in g]
    flat_samples = [s for g in groups for s in g]
    columns = [fn(flat_prompts, flat_samples) for fn in rewards.values()]  # R × [P*G]
    return np.stack(columns, axis=-1).reshape(len(prompts), group_size, len(rewards))
