"""Clipped GRPO surrogate on top of the fused log-prob kernels, and its group-normalised entry point.

loss = -sum_n mask_n * min(r_n A_n, clip(r_n, 1 - eps_low, 1 + eps_high) A_n) / normaliser
       - entropy_coef * masked mean entropy,     r_n = exp(logp_n - logp_old_n).

The heavy part (logits over the vocabulary) runs in the chosen log-prob kernel; the surrogate is
elementwise over tokens, so autodiff of it feeds d loss / d logp and d loss / d entropy straight into
the kernel's backward pass. Wrap the call in one jax.jit to fuse everything.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxwrite.kernels.logprobs import token_logprobs


def clipped_surrogate(logp: jax.Array, logp_old: jax.Array, advantages: jax.Array, eps_low: float,
                      eps_high: float) -> tuple[jax.Array, jax.Array]:
    """Per-token objective min(r A, clip(r) A) [N] and whether the clipped branch is active [N]."""
    ratio = jnp.exp(logp - logp_old)
    clipped_ratio = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    objective = jnp.minimum(ratio * advantages, clipped_ratio * advantages)
    is_clipped = ((advantages > 0) & (ratio > 1.0 + eps_high)) | ((advantages < 0) & (ratio < 1.0 - eps_low))
    return objective, is_clipped


def grpo_policy_loss(h: jax.Array, w: jax.Array, token_ids: jax.Array, logp_old: jax.Array,
                     advantages: jax.Array, mask: jax.Array, *, segment_ids: jax.Array | None = None,
                     temperature: float = 1.0, eps_low: float = 0.2, eps_high: float = 0.2,
                     normaliser: float | None = None, entropy_coef: float = 0.0,
                     grad_through_targets: bool = False, impl: str = "auto",
                     block_tokens: int | None = None, block_vocab: int | None = None,
                     ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Scalar loss and per-token / summary metrics.

    h [N, D], w [D, V], token_ids [N], logp_old [N] (sampled at the same temperature), mask [N].
    advantages: [N] per token, or [S] per sequence when segment_ids [N] (values in 0..S-1) is given.
    normaliser: None = number of unmasked tokens (token-level mean); a number = that constant.
    grad_through_targets=False stops gradients into logp_old and advantages.
    """
    if segment_ids is not None:
        advantages = advantages[segment_ids]  # [S] -> [N]
    if advantages.shape != token_ids.shape or logp_old.shape != token_ids.shape or mask.shape != token_ids.shape:
        raise ValueError(f"expected advantages, logp_old and mask shaped like token_ids {token_ids.shape}; got "
                         f"{advantages.shape}, {logp_old.shape}, {mask.shape}")
    if not grad_through_targets:
        logp_old, advantages = jax.lax.stop_gradient(logp_old), jax.lax.stop_gradient(advantages)
    logp, entropy = token_logprobs(h, w, token_ids, temperature=temperature, impl=impl,
                                   block_tokens=block_tokens, block_vocab=block_vocab)
    mask = mask.astype(jnp.float32)
    objective, is_clipped = clipped_surrogate(logp, logp_old.astype(jnp.float32),
                                              advantages.astype(jnp.float32), eps_low, eps_high)
    n_tokens = jnp.maximum(jnp.sum(mask), 1.0)
    denom = n_tokens if normaliser is None else jnp.float32(normaliser)
    mean_entropy = jnp.sum(mask * entropy) / n_tokens
    loss = -jnp.sum(mask * objective) / denom - entropy_coef * mean_entropy
    metrics = {
        "logp": logp,
        "entropy": entropy,
        "ratio": jnp.exp(logp - jax.lax.stop_gradient(logp_old)),
        "clip_fraction": jnp.sum(mask * is_clipped) / n_tokens,
        "mean_entropy": mean_entropy,
    }
    return loss, metrics


def group_zscore_advantages(rewards: jax.Array, eps: float = 1e-6, ddof: int = 1) -> tuple[jax.Array, jax.Array]:
    """Per-sequence advantages [P * G] from group rewards [P, G] or [P, G, R], and the zero-variance count.

    Each reward is z-scored within its group of G samples separately, then the R rewards are averaged
    (normalise-then-average, as LongWriter-Zero). A group whose reward does not vary gives 0 for that
    reward; `zero_variance` counts such (group, reward) pairs so callers can report them.
    """
    if rewards.ndim == 2:
        rewards = rewards[..., None]
    if rewards.ndim != 3:
        raise ValueError(f"expected rewards [P, G] or [P, G, R]; got {rewards.shape}")
    rewards = rewards.astype(jnp.float32)  # [P, G, R]
    centred = rewards - jnp.mean(rewards, axis=1, keepdims=True)
    std = jnp.std(rewards, axis=1, keepdims=True, ddof=ddof)  # [P, 1, R]
    flat = std <= eps
    z = jnp.where(flat, 0.0, centred / jnp.where(flat, 1.0, std))
    advantages = jnp.mean(z, axis=-1).reshape(-1)  # [P * G]
    return advantages, jnp.sum(flat)


def grpo_loss_from_rewards(h: jax.Array, w: jax.Array, token_ids: jax.Array, logp_old: jax.Array,
                           rewards: jax.Array, segment_ids: jax.Array, mask: jax.Array, *,
                           std_eps: float = 1e-6, std_ddof: int = 1, **loss_kwargs,
                           ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """GRPO loss straight from raw group rewards [P, G] / [P, G, R].

    segment_ids [N] gives each token's sequence index p * G + g. Other keywords go to grpo_policy_loss.
    Metrics add `advantages` [P * G] and `zero_variance_groups`.
    """
    advantages, zero_variance = group_zscore_advantages(rewards, eps=std_eps, ddof=std_ddof)
    loss, metrics = grpo_policy_loss(h, w, token_ids, logp_old, advantages, mask, segment_ids=segment_ids,
                                     **loss_kwargs)
    metrics.update(advantages=advantages, zero_variance_groups=zero_variance)
    return loss, metrics
