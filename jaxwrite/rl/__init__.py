"""GRPO the LongWriter-Zero way: rewards, group advantages, the clipped policy loss, guard rails.

A GRPO step calls, in order:
  rewards = score_groups({name: make_reward(name, ...)}, prompts, groups)   # [P, G, R]
  advantages, stats = group_advantages_with_stats(rewards, method)          # [P, G]
  metrics = rollout_step_metrics(rewards, names, advantages, groups, step=step)
  loss, loss_metrics = grpo_policy_loss(logp_new, logp_old, advantages.reshape(-1), mask, ...)
The trainer's update step computes the same advantages inside its jit, from rows that carry their
group's rewards (group_rows -> row_advantages). All of this math lives in rl/algo_core.py; the
"grpo" objective is registered by rl/grpo.py, which the trainer imports when a recipe names it.
"""
from jaxwrite.rl.algo_core import (ADVANTAGE_ESTIMATORS, IS_CORRECTIONS, LOSS_AGGREGATIONS, completed_mask,
                                   constant_groups, group_advantages, group_advantages_with_stats, group_rows,
                                   group_zscore, grpo_policy_loss, importance_weights, informative_groups,
                                   overlong_penalty, row_advantages, sampler_mismatch)
from jaxwrite.rl.config import LengthTaskConfig, RLConfig, rl_config
from jaxwrite.rl.grpo import LossSettings, RolloutStream, grpo_loss_fn
from jaxwrite.rl.grpo_setup import prepare_grpo
from jaxwrite.rl.guardrails import distribution_stats, rollout_step_metrics
from jaxwrite.rl.length import length_reward
from jaxwrite.rl.plots import first_last_means, plot_reward_curves
from jaxwrite.rl.prompts import RLPromptSet, load_rl_prompts
from jaxwrite.rl.repetition import (RepetitionConfig, RepetitionReport, dominant_script,
                                    ngram_repeat_ratio, near_duplicate_ratio, repetition_penalty,
                                    repetition_report)
from jaxwrite.rl.length_task import length_control_prompts
from jaxwrite.rl.step_time import step_time_rows
from jaxwrite.rl.rewards import (REWARDS, answer_length_reward, batched, format_reward, make_reward,
                                 make_rm_reward, score_groups)
from jaxwrite.rl.types import (RolloutPrompt, RolloutSample, max_words_for_token_cap,
                               words_per_token)

__all__ = [
    "LengthTaskConfig", "LossSettings", "RLConfig", "RolloutStream", "grpo_loss_fn", "length_control_prompts",
    "prepare_grpo", "rl_config",
    "ADVANTAGE_ESTIMATORS", "IS_CORRECTIONS", "LOSS_AGGREGATIONS", "REWARDS",
    "RLPromptSet", "RepetitionConfig", "RepetitionReport", "RolloutPrompt", "RolloutSample",
    "answer_length_reward", "batched", "completed_mask", "constant_groups", "distribution_stats",
    "dominant_script", "first_last_means", "format_reward", "group_advantages", "group_advantages_with_stats",
    "group_rows", "group_zscore", "grpo_policy_loss", "importance_weights", "informative_groups", "length_reward",
    "load_rl_prompts", "make_reward",
    "make_rm_reward", "max_words_for_token_cap", "near_duplicate_ratio", "ngram_repeat_ratio", "overlong_penalty",
    "plot_reward_curves", "repetition_penalty", "repetition_report", "rollout_step_metrics", "row_advantages",
    "sampler_mismatch", "score_groups", "step_time_rows", "words_per_token",
]
