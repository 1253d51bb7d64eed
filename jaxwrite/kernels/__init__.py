"""Fused kernels with custom VJPs, each beside its plain-jnp reference and a chunked XLA fallback.

Token log-probs / entropy from hidden states and the LM head without materialising [N, V] logits.
What is built on them (the GRPO policy loss, group advantages) lives in `jaxwrite.rl`.
"""
from jaxwrite.kernels.logprobs import LOGPROB_IMPLS, resolve_impl, token_logprobs

__all__ = ["LOGPROB_IMPLS", "resolve_impl", "token_logprobs"]
