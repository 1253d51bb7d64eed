"""Fused kernels with custom VJPs, each beside its plain-jnp reference and a chunked XLA fallback.

Token log-probs / entropy from hidden states and the LM head without materialising [N, V] logits,
and the clipped GRPO policy loss built on them.
"""
from jaxwrite.kernels.grpo_loss import (
    clipped_surrogate,
    group_zscore_advantages,
    grpo_loss_from_rewards,
    grpo_policy_loss,
)
from jaxwrite.kernels.logprobs import LOGPROB_IMPLS, resolve_impl, token_logprobs

__all__ = [
    "LOGPROB_IMPLS",
    "clipped_surrogate",
    "group_zscore_advantages",
    "grpo_loss_from_rewards",
    "grpo_policy_loss",
    "resolve_impl",
    "token_logprobs",
]
