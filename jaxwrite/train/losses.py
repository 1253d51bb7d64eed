"""The losses of the built-in objectives: `loss_fn(model, batch, rng) -> (loss, metrics)`, with `loss` a
float32 scalar and `metrics` a dict of float32 scalars averaged over microbatches."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx


def masked_next_token_loss(model: nnx.Module, batch: dict[str, jax.Array],
                           rng: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean next-token NLL over targets with loss_mask = 1 (packed rows attend within their segment).

    batch: tokens, targets, loss_mask, segment_ids, positions  [batch, seq] int32.
    """
    del rng  # deterministic forward (no dropout in these models)
    logits = model(batch["tokens"], positions=batch["positions"],
                   segment_ids=batch["segment_ids"])                               # [batch, seq, vocab] f32
    # logsumexp - target logit: no [batch, seq, vocab] log-softmax is materialised.
    target_logit = jnp.take_along_axis(logits, batch["targets"][..., None], axis=-1)[..., 0]  # [batch, seq]
    nll = jax.nn.logsumexp(logits, axis=-1) - target_logit                         # [batch, seq]
    mask = batch["loss_mask"].astype(jnp.float32)
    count = mask.sum()
    loss = (nll * mask).sum() / jnp.maximum(count, 1.0)
    correct = (jnp.argmax(logits, axis=-1) == batch["targets"]).astype(jnp.float32)
    accuracy = (correct * mask).sum() / jnp.maximum(count, 1.0)
    return loss, {"loss": loss, "token_accuracy": accuracy, "loss_tokens": count}


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
