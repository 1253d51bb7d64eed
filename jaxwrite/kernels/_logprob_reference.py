"""Plain-jnp token log-probs and entropy: materialises the full [tokens, vocab] logits.

The ground truth for tests and the "naive" line of benchmarks/grpo_loss.py. Gradients come from autodiff.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def reference_token_logprobs(h: jax.Array, w: jax.Array, token_ids: jax.Array, temperature: float = 1.0,
                             block_tokens: int | None = None, block_vocab: int | None = None,
                             entropy_grad: bool = True) -> tuple[jax.Array, jax.Array]:
    """-> (logp [N], entropy [N]) float32; block sizes are accepted for a common signature and unused.
    entropy_grad=False: the entropy is a metric (no gradient flows from it)."""
    del block_tokens, block_vocab
    logits = jnp.dot(h, w, preferred_element_type=jnp.float32) / temperature  # [N, V]
    log_probs = jax.nn.log_softmax(logits, axis=-1)  # [N, V]
    logp = jnp.take_along_axis(log_probs, token_ids[:, None].astype(jnp.int32), axis=-1)[:, 0]
    entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
    return logp, entropy if entropy_grad else jax.lax.stop_gradient(entropy)
