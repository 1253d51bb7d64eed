"""The losses of the built-in objectives: `loss_fn(model, batch, rng) -> (loss, metrics)`, with `loss` a
float32 scalar and `metrics` a dict of float32 scalars averaged over microbatches."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.kernels import token_logprobs


def masked_next_token_loss(model: nnx.Module, batch: dict[str, jax.Array],
                           rng: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean next-token NLL over targets with loss_mask = 1 (packed rows attend within their segment).

    batch: tokens, targets, loss_mask, segment_ids, positions  [batch, seq] int32.
    The log-probs come from the tiled log-prob kernels (jaxwrite.kernels): [batch, seq, vocab] logits
    are never materialised (at 32k tokens x 152k vocabulary they would be 20 GB of float32 per row).
    """
    del rng  # deterministic forward (no dropout in these models)
    hidden = model(batch["tokens"], positions=batch["positions"], segment_ids=batch["segment_ids"],
                   logits=False).hidden                                              # [batch, seq, d_model]
    b, t, d = hidden.shape
    dt = jnp.dtype(model.cfg.dtype)   # the plain head's compute dtype (logits_from_hidden)
    logp, _ = token_logprobs(hidden.reshape(b * t, d).astype(dt), model.head_weight().astype(dt),
                             batch["targets"].reshape(-1), entropy_grad=False)      # [batch * seq] f32
    nll = -logp.reshape(b, t)
    mask = batch["loss_mask"].astype(jnp.float32)
    count = mask.sum()
    loss = (nll * mask).sum() / jnp.maximum(count, 1.0)
    return loss, {"loss": loss, "loss_tokens": count}


def bradley_terry_loss(model: nnx.Module, batch: dict[str, jax.Array],
                       rng: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """-log σ(r(x, chosen) - r(x, rejected)), with pairwise accuracy and the length-only baseline.

    batch: chosen_tokens, rejected_tokens [batch, seq] int32 (right-padded); chosen_length,
    rejected_length [batch] int32. The reward is read at each row's last real token.
    """
    del rng
    tokens = jnp.concatenate([batch["chosen_tokens"], batch["rejected_tokens"]], axis=0)    # [2·batch, seq]
    lengths = jnp.concatenate([batch["chosen_length"], batch["rejected_length"]], axis=0)   # [2·batch]
    mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
    rewards = model(tokens, attention_mask=mask)                                            # [2·batch]
    chosen, rejected = jnp.split(rewards, 2)
    margin = chosen - rejected
    loss = -jax.nn.log_sigmoid(margin).mean()
    accuracy = (margin > 0).astype(jnp.float32).mean()
    # What "prefer the longer response" scores on the same pairs (ties count one half).
    longer = jnp.sign(batch["chosen_length"] - batch["rejected_length"]).astype(jnp.float32)
    length_baseline = ((longer + 1.0) / 2.0).mean()
    return loss, {"loss": loss, "accuracy": accuracy, "margin": margin.mean(),
                  "length_baseline_accuracy": length_baseline,
                  "reward_chosen": chosen.mean(), "reward_rejected": rejected.mean()}
