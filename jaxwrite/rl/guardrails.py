"""Per-step GRPO health metrics, with loud warnings when the batch stops carrying signal.

Truncated rollouts (the answer was cut by the generation cap) and zero-variance groups (every
sample of a prompt got the same reward, so it teaches nothing) are the two quiet ways a GRPO run
goes wrong; both are logged every step and warned about above a threshold.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from jaxwrite.rl.algo_core import constant_groups, group_zscore
from jaxwrite.rl.types import RolloutPrompt, RolloutSample

log = logging.getLogger(__name__)


def distribution_stats(values: Sequence[float], prefix: str) -> dict[str, float]:
    """{prefix}/mean, /p50, /p90, /max of a non-empty sequence."""
    v = np.asarray(values, np.float64)
    if v.size == 0:
        raise ValueError(f"{prefix}: expected at least one value")
    return {f"{prefix}/mean": float(v.mean()), f"{prefix}/p50": float(np.percentile(v, 50)),
            f"{prefix}/p90": float(np.percentile(v, 90)), f"{prefix}/max": float(v.max())}


def rollout_step_metrics(rewards: np.ndarray, reward_names: Sequence[str], advantages: np.ndarray,
                         groups: Sequence[Sequence[RolloutSample]], *, step: int | None = None,
                         prompts: Sequence[RolloutPrompt] | None = None, truncation_warning: float = 0.05,
                         zero_variance_warning: float = 0.5) -> dict[str, float]:
    """Flat metrics for one step: rewards [P, G, R] (raw), advantages [P, G], groups [P][G].

    Raw rewards: mean/std/min/max per reward. Normalised rewards (group z-scores): mean |z| per
    reward, which falls to 0 as groups stop differing. Also advantage stats, answer/think word and
    token counts, the truncated fraction (finish_reason 'length'), the well-formed fraction and
    zero-variance fractions (per reward, and prompts where every reward is constant). With the P
    `prompts`, in_range_frac: the share of samples well-formed with an answer inside their prompt's
    requested [lower, upper] words (LongWriter-Zero's figure of merit; the length reward is lenient outside).
    """
    rewards = np.asarray(rewards, np.float64)
    advantages = np.asarray(advantages, np.float64)
    num_prompts, group_size, num_rewards = rewards.shape
    if len(reward_names) != num_rewards:
        raise ValueError(f"reward_names: expected {num_rewards} names, got {len(reward_names)}")
    if advantages.shape != (num_prompts, group_size):
        raise ValueError(f"advantages: expected shape {(num_prompts, group_size)}, got {advantages.shape}")
    samples = [s for g in groups for s in g]
    if len(samples) != num_prompts * group_size:
        raise ValueError(f"groups: expected {num_prompts} × {group_size} samples, got {len(samples)}")

    metrics: dict[str, float] = {}
    normalised = group_zscore(rewards)  # [P, G, R]
    constant = constant_groups(rewards)  # [P, R]
    for r, name in enumerate(reward_names):
        raw = rewards[:, :, r]
        metrics.update({f"reward/{name}/mean": float(raw.mean()), f"reward/{name}/std": float(raw.std()),
                        f"reward/{name}/min": float(raw.min()), f"reward/{name}/max": float(raw.max()),
                        f"reward/{name}/normalised_abs_mean": float(np.abs(normalised[:, :, r]).mean()),
                        f"reward/{name}/zero_variance_frac": float(constant[:, r].mean())})
    metrics.update({"advantage/mean": float(advantages.mean()), "advantage/std": float(advantages.std()),
                    "advantage/min": float(advantages.min()), "advantage/max": float(advantages.max())})
    metrics.update(distribution_stats([s.answer_words for s in samples], "answer_words"))
    metrics.update(distribution_stats([s.think_words for s in samples], "think_words"))
    metrics.update(distribution_stats([s.num_tokens for s in samples], "completion_tokens"))
    truncated = float(np.mean([s.truncated for s in samples]))
    zero_variance = float(np.all(constant, axis=1).mean())
    metrics["truncated_frac"] = truncated
    metrics["well_formed_frac"] = float(np.mean([s.parsed.well_formed for s in samples]))
    metrics["zero_variance_prompt_frac"] = zero_variance
    if prompts is not None:
        if len(prompts) != num_prompts:
            raise ValueError(f"prompts: expected {num_prompts}, got {len(prompts)}")
        metrics["in_range_frac"] = float(np.mean([s.parsed.well_formed and p.lower <= s.answer_words <= p.upper
                                                  for p, g in zip(prompts, groups) for s in g]))

    where = f"step {step}: " if step is not None else ""
    if truncated > truncation_warning:
        log.warning("%s%.1f%% of rollouts hit the generation cap (finish_reason='length'; threshold "
                    "%.1f%%): their answers are cut or missing. Raise max_new_tokens, lower the length "
                    "targets, or look for repetition loops.", where, 100 * truncated, 100 * truncation_warning)
    if zero_variance > zero_variance_warning:
        log.warning("%s%.1f%% of prompts have every reward constant across their group (threshold "
                    "%.1f%%): they contribute no gradient. Check the rewards or raise the group size "
                    "or temperature.", where, 100 * zero_variance, 100 * zero_variance_warning)
    return metrics
