"""GRPO math in one place: group-advantage estimators and policy-loss aggregations, each picked by name
from the recipe config (`rl.advantage`, `rl.loss_aggregation`), and the clipped policy loss.

Rewards are [num_prompts P, group_size G, num_rewards R]: G samples per prompt, each scored by R
rewards; advantages are [P, G]. The estimators run on numpy arrays (float64 stays float64) and on jax
arrays (jittable with `method` static). Training computes them inside its jitted update step: each
batch row carries its whole group's rewards (`group_rows`), so `row_advantages` gives every row the
estimator's value whatever minibatch, shuffle or shard the row lands in.

One zero-variance rule: a group whose values are all equal (max == min, an exact test with no rounding
slack) contributes exactly 0, and that is what the metrics count as a zero-variance group. A threshold
on the std (std <= eps) would also zero groups whose rewards do differ, just by little, and silence
their signal; `eps` is instead added to the std of the other groups, which keeps near-constant groups
(std ~1e-17 from float rounding) from blowing up. Standard deviations are sample std (ddof=1), as TRL's
GRPOTrainer computes them with torch's default `Tensor.std`.

Policy loss per token, with ratio = exp(logp_new − logp_old):
  loss = max(−A·ratio, −A·clip(ratio, 1 − eps_low, 1 + eps_high)) + β·k3(ref ‖ new),
  k3 = exp(logp_ref − logp_new) − (logp_ref − logp_new) − 1   (Schulman's unbiased, ≥ 0 estimator).
eps_high defaults to eps_low; a larger eps_high is DAPO's clip-higher. Token losses are reduced by a
named aggregation. The token log-probs come from `jaxwrite.kernels.token_logprobs` (see rl/grpo.py).

Off-policy rollouts (asynchronous with a staleness bound, or continued across steps: rl/pipeline.py,
rl/partial.py) were sampled by older weights than the ones being updated. Each surrogate token is then
weighted by a named importance correction of π_old / π_sampler (`rl.is_correction`): "tis" is the
truncated weight min(π_old / π_sampler, C) of Yao et al. 2025 ("Your efficient RL framework secretly
brings you off-policy RL training"), with π_sampler the engine's log-prob of the token under the weights
that sampled it and π_old the update's own (held constant); the KL term is not weighted.

DAPO (Yu et al. 2025, arXiv:2503.14476) adds, beside clip-higher and the token-mean aggregation, dynamic
sampling (groups whose advantages are all 0 are dropped: `informative_groups`) and the overlong soft
punishment in tokens (`overlong_penalty`).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.common import Registry
from jaxwrite.rl.types import FINISH_TRUNCATED

# fn(rewards [P, G, R], weights [R], eps, xp) -> advantages [P, G]
AdvantageEstimator = Callable[[Any, Any, float, Any], Any]
ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")

# fn(token_loss [B, T], mask [B, T] float, max_tokens) -> scalar
Aggregation = Callable[[jnp.ndarray, jnp.ndarray, int], jnp.ndarray]
LOSS_AGGREGATIONS: Registry[Aggregation] = Registry("policy-loss aggregation")

# fn(log_ratio [...] = log π_old − log π_sampler, cap) -> token weights [...] (elementwise, jittable)
ImportanceCorrection = Callable[[jnp.ndarray, float], jnp.ndarray]
IS_CORRECTIONS: Registry[ImportanceCorrection] = Registry("importance-weight correction")

DEFAULT_EPS = 1e-6


def _xp(x):
    return jnp if isinstance(x, jax.Array) else np


# --- group advantages ------------------------------------------------------------------------------
def constant_groups(x):
    """[P, G, ...] -> [P, ...]: True where every sample of the group has the same value."""
    xp = _xp(x)
    return xp.max(x, axis=1) == xp.min(x, axis=1)


def group_zscore(x, eps: float = DEFAULT_EPS):
    """[P, G, ...] -> same shape: (x − group mean) / (group sample std + eps); 0 in constant groups."""
    xp = _xp(x)
    if x.shape[1] < 2:
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


def group_rows(rewards) -> dict[str, np.ndarray]:
    """Rewards [P, G, R] -> what each batch row needs for its advantage, rows prompt-major (p·G + g):
    group_rewards [P·G, G, R] float32 (the row's whole group) and group_index [P·G] int32 (g)."""
    rewards = np.asarray(rewards, np.float32)
    if rewards.ndim != 3:
        raise ValueError(f"rewards: expected shape [num_prompts, group_size, num_rewards], got {rewards.shape}")
    num_prompts, group_size, _ = rewards.shape
    return {"group_rewards": np.repeat(rewards, group_size, axis=0),
            "group_index": np.tile(np.arange(group_size, dtype=np.int32), num_prompts)}


def informative_groups(rewards, method: str = "longwriter_zero", weights=None, eps: float = DEFAULT_EPS):
    """[P, G, R] rewards -> [P] bool: False for groups whose advantages are all exactly 0 under `method`
    (their combined rewards are all equal, so they teach nothing). DAPO's dynamic sampling drops those."""
    advantages = group_advantages(rewards, method, weights, eps)
    xp = _xp(advantages)
    return ~xp.all(advantages == 0, axis=1)


def overlong_penalty(num_tokens, max_tokens: int, buffer: int, penalty: float = 1.0) -> np.ndarray:
    """DAPO's overlong soft punishment, in tokens: 0 up to max_tokens − buffer, then falling linearly to
    −penalty at max_tokens (a sample cut by the cap gets −penalty). num_tokens [n] -> [n] float64."""
    if not 0 < buffer < max_tokens:
        raise ValueError(f"buffer: expected 0 < buffer < max_tokens ({max_tokens}), got {buffer}")
    n = np.asarray(num_tokens, np.float64)
    over = np.clip(n - (max_tokens - buffer), 0.0, float(buffer))
    return -float(penalty) * over / buffer


@IS_CORRECTIONS.register("none")
def _no_correction(log_ratio, cap):
    """Every token weighs 1 (the sampler is taken to be the policy the update starts from)."""
    return jnp.ones_like(log_ratio)


@IS_CORRECTIONS.register("tis")
def _truncated_is(log_ratio, cap):
    """Truncated importance sampling: min(π_old / π_sampler, cap) per token (Yao et al. 2025)."""
    return jnp.minimum(jnp.exp(log_ratio), cap)


def importance_weights(logp_old, logp_sampler, mask, method: str = "tis", cap: float = 2.0):
    """[B, T] token weights of the surrogate against the sampler's log-probs (no gradient; 1 on padding).
    Under jit, method and cap are static."""
    log_ratio = jnp.where(mask > 0, logp_old - logp_sampler, 0.0)                     # [B, T]
    return jax.lax.stop_gradient(IS_CORRECTIONS.get(method)(log_ratio, cap))


def sampler_mismatch(logp_train, logp_sampler, mask) -> dict[str, jnp.ndarray]:
    """How far the engine's log-probs are from the update step's on the same tokens, over mask [B, T]:
    sampler/kl, the k3 estimate of KL(sampler ‖ trainer) (the tokens were drawn by the sampler), and
    sampler/logp_diff_max, the largest per-token |log π_train − log π_sampler|."""
    valid = mask > 0
    diff = jnp.where(valid, logp_train - logp_sampler, 0.0)                            # [B, T]
    return {"sampler/kl": _masked_mean(jnp.exp(diff) - diff - 1.0, mask.astype(diff.dtype)),
            "sampler/logp_diff_max": jnp.max(jnp.abs(diff))}


def row_advantages(group_rewards, group_index, method: str = "longwriter_zero", weights=None,
                   eps: float = DEFAULT_EPS):
    """[B] advantages of rows that each carry their group's rewards [B, G, R] and their place in it [B]:
    row b gets group_advantages(group_rewards[b:b+1], ...)[0, group_index[b]]. Jittable (method static)."""
    advantages = group_advantages(group_rewards, method, weights, eps)  # [B, G]
    xp = _xp(advantages)
    return xp.take_along_axis(advantages, xp.asarray(group_index)[:, None], axis=1)[:, 0]


# --- policy loss -----------------------------------------------------------------------------------
@LOSS_AGGREGATIONS.register("token_mean")
def _token_mean(token_loss, mask, max_tokens):
    """Sum over every valid token / number of valid tokens (long answers weigh more; DAPO)."""
    return jnp.sum(token_loss * mask) / jnp.maximum(jnp.sum(mask), 1.0)


@LOSS_AGGREGATIONS.register("seq_mean_token_mean")
def _seq_mean_token_mean(token_loss, mask, max_tokens):
    """Mean over each sequence's valid tokens, then over sequences that have any (original GRPO)."""
    tokens = jnp.sum(mask, axis=1)  # [B]
    per_seq = jnp.sum(token_loss * mask, axis=1) / jnp.maximum(tokens, 1.0)  # [B]
    present = (tokens > 0).astype(token_loss.dtype)
    return jnp.sum(per_seq * present) / jnp.maximum(jnp.sum(present), 1.0)


@LOSS_AGGREGATIONS.register("constant")
def _constant(token_loss, mask, max_tokens):
    """Sum / (B × max_tokens), a constant normaliser free of length bias (Dr. GRPO)."""
    return jnp.sum(token_loss * mask) / (token_loss.shape[0] * max_tokens)


def completed_mask(finish_reasons: Sequence[str]) -> np.ndarray:
    """[B] bool: False for rollouts cut by the generation cap, to exclude them from the loss."""
    return np.array([r != FINISH_TRUNCATED for r in finish_reasons], bool)


def _masked_mean(x, mask):
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def grpo_policy_loss(logp_new, logp_old, advantages, mask, *, logp_ref=None, sample_mask=None,
                     token_weights=None, eps_low: float = 0.2, eps_high: float | None = None, beta: float = 0.0,
                     aggregation: str = "token_mean", max_tokens: int | None = None):
    """Clipped-surrogate loss and metrics.

    logp_new, logp_old, logp_ref, mask: [B, T] per completion token (mask 1 on real tokens);
    advantages, sample_mask: [B] (sample_mask False drops a sequence, e.g. `completed_mask`);
    token_weights: [B, T] importance weights of the surrogate (`importance_weights`), None = 1.
    max_tokens: the "constant" aggregation's normaliser, default T (set it to the generation cap).
    Under jit, eps_low, eps_high, beta, aggregation and max_tokens are static arguments.
    Returns (scalar loss, metrics): clip_frac_low/high (share of tokens whose clipped branch is
    active, so their gradient is 0), ratio_mean, approx_kl_old (k3 of old vs new), kl_ref (k3, only
    with logp_ref), is_weight_mean (only with token_weights), all means over the tokens that enter the loss.
    """
    if logp_new.ndim != 2 or logp_old.shape != logp_new.shape or mask.shape != logp_new.shape:
        raise ValueError(f"logp_new, logp_old, mask: expected equal [B, T] shapes, got "
                         f"{logp_new.shape}, {logp_old.shape}, {mask.shape}")
    if advantages.shape != logp_new.shape[:1]:
        raise ValueError(f"advantages: expected shape [{logp_new.shape[0]}], got {advantages.shape}")
    if beta and logp_ref is None:
        raise ValueError("logp_ref: required when beta > 0")
    eps_high = eps_low if eps_high is None else eps_high
    dtype = logp_new.dtype
    mask = mask.astype(dtype)
    if sample_mask is not None:
        mask = mask * jnp.asarray(sample_mask, dtype)[:, None]
    adv = advantages.astype(dtype)[:, None]  # [B, 1]

    valid = mask > 0
    # Padding may hold any log-prob; zeroing its log-ratio before exp keeps inf·0 = NaN out of
    # the loss and its gradient.
    log_ratio = jnp.where(valid, logp_new - logp_old, 0.0)  # [B, T]
    ratio = jnp.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    token_loss = jnp.maximum(unclipped, clipped)  # [B, T]
    if token_weights is not None:
        token_loss = token_loss * token_weights.astype(dtype)

    metrics = {
        "clip_frac_low": _masked_mean(((ratio < 1.0 - eps_low) & (adv < 0)).astype(dtype), mask),
        "clip_frac_high": _masked_mean(((ratio > 1.0 + eps_high) & (adv > 0)).astype(dtype), mask),
        "ratio_mean": _masked_mean(ratio, mask),
        "approx_kl_old": _masked_mean(jnp.exp(-log_ratio) + log_ratio - 1.0, mask),
    }
    if token_weights is not None:
        metrics["is_weight_mean"] = _masked_mean(token_weights.astype(dtype), mask)
    if logp_ref is not None:
        ref_log_ratio = jnp.where(valid, logp_ref - logp_new, 0.0)  # [B, T]
        kl = jnp.exp(ref_log_ratio) - ref_log_ratio - 1.0
        metrics["kl_ref"] = _masked_mean(kl, mask)
        if beta:
            token_loss = token_loss + beta * kl
    loss = LOSS_AGGREGATIONS.get(aggregation)(token_loss, mask, max_tokens or logp_new.shape[1])
    metrics["loss"] = loss
    return loss, metrics

