"""GRPO clipped-surrogate policy loss: the plain-jnp reference (jittable, static strings).

Per token, with ratio = exp(logp_new − logp_old):
  loss = max(−A·ratio, −A·clip(ratio, 1 − eps_low, 1 + eps_high)) + β·k3(ref ‖ new),
  k3 = exp(logp_ref − logp_new) − (logp_ref − logp_new) − 1   (Schulman's unbiased, ≥ 0 estimator).
eps_high defaults to eps_low; a larger eps_high is DAPO's clip-higher. Token losses are reduced by a
named aggregation from LOSS_AGGREGATIONS.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax.numpy as jnp
import numpy as np

from jaxwrite.common import Registry
from jaxwrite.rl.types import FINISH_TRUNCATED

# fn(token_loss [B, T], mask [B, T] float, max_tokens) -> scalar
Aggregation = Callable[[jnp.ndarray, jnp.ndarray, int], jnp.ndarray]
LOSS_AGGREGATIONS: Registry[Aggregation] = Registry("policy-loss aggregation")


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
                     eps_low: float = 0.2, eps_high: float | None = None, beta: float = 0.0,
                     aggregation: str = "token_mean", max_tokens: int | None = None):
    """Clipped-surrogate loss and metrics.

    logp_new, logp_old, logp_ref, mask: [B, T] per completion token (mask 1 on real tokens);
    advantages, sample_mask: [B] (sample_mask False drops a sequence, e.g. `completed_mask`).
    max_tokens: the "constant" aggregation's normaliser, default T (set it to the generation cap).
    Under jit, eps_low, eps_high, beta, aggregation and max_tokens are static arguments.
    Returns (scalar loss, metrics): clip_frac_low/high (share of tokens whose clipped branch is
    active, so their gradient is 0), ratio_mean, approx_kl_old (k3 of old vs new), kl_ref (k3, only
    with logp_ref), all means over the tokens that enter the loss.
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

    metrics = {
        "clip_frac_low": _masked_mean(((ratio < 1.0 - eps_low) & (adv < 0)).astype(dtype), mask),
        "clip_frac_high": _masked_mean(((ratio > 1.0 + eps_high) & (adv > 0)).astype(dtype), mask),
        "ratio_mean": _masked_mean(ratio, mask),
        "approx_kl_old": _masked_mean(jnp.exp(-log_ratio) + log_ratio - 1.0, mask),
    }
    if logp_ref is not None:
        ref_log_ratio = jnp.where(valid, logp_ref - logp_new, 0.0)  # [B, T]
        kl = jnp.exp(ref_log_ratio) - ref_log_ratio - 1.0
        metrics["kl_ref"] = _masked_mean(kl, mask)
        if beta:
            token_loss = token_loss + beta * kl
    loss = LOSS_AGGREGATIONS.get(aggregation)(token_loss, mask, max_tokens or logp_new.shape[1])
    metrics["loss"] = loss
    return loss, metrics
