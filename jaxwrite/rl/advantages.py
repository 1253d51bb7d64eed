"""Group-relative advantage estimators, chosen by name from the recipe config.

Input rewards are [num_prompts, group_size, num_rewards]: G samples per prompt, each scored by R
rewards. Output advantages are [num_prompts, group_size]. Works on numpy arrays (float64 stays
float64) and on jax arrays (jittable with `method` static).

Standard deviations are sample std (ddof=1), as TRL's GRPOTrainer computes them with torch's
default `Tensor.std`. A group whose values are all equal (max == min, an exact test with no
rounding slack) contributes exactly 0; `eps` is added to the std of the other groups only to keep
near-constant groups (std ~1e-17 from float rounding) from blowing up.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.common import Registry

# fn(rewards [P, G, R], weights [R], eps, xp) -> advantages [P, G]
AdvantageEstimator = Callable[[Any, Any, float, Any], Any]
ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")

DEFAULT_EPS = 1e-6


def _xp(x):
    return jnp if isinstance(x, jax.Array) else np


def constant_groups(x):
    """[P, G, ...] -> [P, ...]: True where every sample of the group has the same value."""
    xp = _xp(x)
    return xp.max(x, axis=1) == xp.min(x, axis=1)


def group_zscore(x, eps: float = DEFAULT_EPS):
    """[P, G, ...] -> same shape: (x − group mean) / (group sample std + eps); 0 in constant groups."""
    xp = _xp(x)
    group_size = x.shape[1]
    if group_size < 2:
        return xp.zeros_like(x)
    centred = x - xp.mean(x, axis=1, keepdims=True)
    std = xp.std(x, axis=1, keepdims=True, ddof=1)
    constant = xp.expand_dims(constant_groups(x), 1)
    return xp.where(constant, xp.zeros_like(x), centred / (std + eps))


def _weighted_sum(rewards, weights, xp):
    return xp.einsum("pgr,r->pg", rewards, weights)  # [P, G]


@ADVANTAGE_ESTIMATORS.register("longwriter_zero")
def _longwriter_zero(rewards, weights, eps, xp):
    """Each reward z-scored within its group, then the weighted mean over rewards (the paper)."""
    return _weighted_sum(group_zscore(rewards, eps), weights, xp) / xp.sum(weights)


@ADVANTAGE_ESTIMATORS.register("grpo")
def _grpo(rewards, weights, eps, xp):
    """Weighted sum of rewards, then z-scored within the group (DeepSeekMath GRPO)."""
    return group_zscore(_weighted_sum(rewards, weights, xp), eps)


@ADVANTAGE_ESTIMATORS.register("dr_grpo")
def _dr_grpo(rewards, weights, eps, xp):
    """Weighted sum minus the group mean, no std division (Dr. GRPO)."""
    total = _weighted_sum(rewards, weights, xp)
    centred = total - xp.mean(total, axis=1, keepdims=True)
    # Exact 0 in constant groups, where float rounding of the mean could leave ~1e-17.
    return xp.where(xp.expand_dims(constant_groups(total), 1), xp.zeros_like(total), centred)


@ADVANTAGE_ESTIMATORS.register("rloo")
def _rloo(rewards, weights, eps, xp):
    """Weighted sum minus the mean of the other G−1 samples: G/(G−1) × (s − group mean)."""
    group_size = rewards.shape[1]
    if group_size < 2:
        return xp.zeros(rewards.shape[:2], rewards.dtype)
    return _dr_grpo(rewards, weights, eps, xp) * (group_size / (group_size - 1))


def _check(rewards, weights, xp):
    if rewards.ndim != 3:
        raise ValueError(f"rewards: expected shape [num_prompts, group_size, num_rewards], "
                         f"got {tuple(rewards.shape)}")
    num_rewards = rewards.shape[2]
    if weights is None:
        return xp.ones((num_rewards,), rewards.dtype)
    if not isinstance(weights, jax.Array):  # concrete weights (traced ones cannot be checked)
        w = np.asarray(weights, np.float64)
        if np.any(w < 0) or not w.sum() > 0:
            raise ValueError(f"weights: expected non-negative values with a positive sum, got {w.tolist()}")
    weights = xp.asarray(weights, rewards.dtype)
    if weights.shape != (num_rewards,):
        raise ValueError(f"weights: expected shape ({num_rewards},) to match num_rewards, "
                         f"got {tuple(weights.shape)}")
    return weights


def _as_float(rewards):
    """numpy or jax array of a floating dtype (integer rewards are promoted), and its namespace."""
    xp = _xp(rewards)
    rewards = xp.asarray(rewards)
    if not xp.issubdtype(rewards.dtype, xp.floating):
        rewards = rewards.astype(xp.float64 if xp is np else jnp.float32)
    return rewards, xp


def group_advantages(rewards, method: str = "longwriter_zero", weights=None, eps: float = DEFAULT_EPS):
    """[num_prompts, group_size, num_rewards] rewards -> [num_prompts, group_size] advantages."""
    rewards, xp = _as_float(rewards)
    weights = _check(rewards, weights, xp)
    return ADVANTAGE_ESTIMATORS.get(method)(rewards, weights, eps, xp)


def group_advantages_with_stats(rewards, method: str = "longwriter_zero", weights=None,
                                eps: float = DEFAULT_EPS):
    """Advantages plus how much of the batch carries no learning signal.

    stats: zero_variance_groups [R] (prompts whose reward r is constant, per reward),
    zero_variance_prompts (prompts with every reward constant) and zero_advantage_prompts
    (prompts whose advantages are all exactly 0 under `method`), all integer counts.
    """
    rewards, xp = _as_float(rewards)
    advantages = group_advantages(rewards, method, weights, eps)
    constant = constant_groups(rewards)  # [P, R]
    stats = {
        "zero_variance_groups": xp.sum(constant, axis=0),
        "zero_variance_prompts": xp.sum(xp.all(constant, axis=1)),
        "zero_advantage_prompts": xp.sum(xp.all(advantages == 0, axis=1)),
    }
    return advantages, stats
