"""The one decoder-only Transformer (Qwen2/2.5, Qwen3, Llama-3 by config) and its scalar-head variant."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.models.attention import Attention, default_positions
from jaxwrite.models.attention_mask import AttentionMask, self_attention_mask
from jaxwrite.models.config import ModelConfig, Remat
from jaxwrite.models.kv_cache import KVCache
from jaxwrite.models.layers import MLP, RMSNorm, param
from jaxwrite.parallel import constrain

_ACT = ("batch", "seq", "act_embed")


class Block(nnx.Module):
    """Pre-norm residual block: x + attn(norm(x)), then + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        pd = jnp.dtype(cfg.param_dtype)
        self.attn_norm = RMSNorm(cfg.d_model, cfg.rms_eps, pd, rngs)
        self.attn = Attention(cfg, rngs)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.rms_eps, pd, rngs)
        self.mlp = MLP(cfg, rngs)

    def __call__(self, x, positions, mask, cache: KVCache | None = None, layer=0):
        """x [B, T, D] -> (x, cache with this block's keys written at layer `layer`)."""
        h, cache = self.attn(self.attn_norm(x), positions, mask, cache, layer)
        x = constrain(x + h, _ACT)
        x = constrain(x + self.mlp(self.mlp_norm(x)), _ACT)
        return x, cache


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TransformerOutput:
    """What a Transformer call returns, whatever its arguments."""
    logits: jax.Array | None     # [B, T, V] float32; None when the call asked for hidden states only
    hidden: jax.Array            # [B, T, D] final-norm hidden states (the LM head's input)
    cache: KVCache | None        # the cache with this call's tokens written and counted; None without one


class Transformer(nnx.Module):
    """Token ids [B, T] -> TransformerOutput (logits [B, T, V] float32, hidden states, cache).

    Layers are stacked on a leading axis and run with `lax.scan`, so compile time does not grow with depth.
    Call with `cache=KVCache` to decode: the tokens attend the cache's filled slots, are written after
    them, and the output's cache counts them.
    """

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs, lm_head: bool = True):
        pd = jnp.dtype(cfg.param_dtype)
        self.cfg = cfg
        # std 0.02 as in the reference initialisers: with tied embeddings it keeps initial logits near
        # uniform (loss ≈ ln(vocab)); a unit-variance table would give logits of std sqrt(d_model).
        self.embed = param(rngs, (cfg.vocab_size, cfg.d_model), ("vocab", "embed"), pd, 0.02)

        @nnx.split_rngs(splits=cfg.num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs: nnx.Rngs) -> Block:
            return Block(cfg, rngs)

        self.layers = make_layers(rngs)
        self.final_norm = RMSNorm(cfg.d_model, cfg.rms_eps, pd, rngs)
        self.has_lm_head = lm_head
        if lm_head and not cfg.tie_embeddings:
            self.lm_head = param(rngs, (cfg.d_model, cfg.vocab_size), ("embed", "vocab"), pd,
                                 cfg.d_model ** -0.5)

    # --- pieces of a forward pass (the fused GRPO loss, the reward head and the engine use them) ---
    def embed_tokens(self, tokens: jax.Array) -> jax.Array:
        """Token ids [B, T] -> embeddings [B, T, D] in the compute dtype."""
        x = jnp.take(self.embed.get_value(), tokens, axis=0).astype(jnp.dtype(self.cfg.dtype))
        return constrain(x, _ACT)

    def layer(self, i: int) -> Block:
        """Layer i as a Block of its own (outside jit its weights are copies of the stacked slices)."""
        graphdef, state = nnx.split(self.layers)
        return nnx.merge(graphdef, jax.tree.map(lambda x: x[i], state))

    def apply_layers(self, x: jax.Array, positions: jax.Array, mask: AttentionMask, cache: KVCache | None = None):
        """Every layer, in one scan over the stacked weights: x [B, T, D] -> (x, cache with every
        layer's new keys and values written; lengths unchanged, see KVCache.advance)."""
        cfg = self.cfg
        graphdef, state = nnx.split(self.layers)

        def body(carry, xs):
            x, cache = carry
            layer_state, i = xs
            return nnx.merge(graphdef, layer_state)(x, positions, mask, cache, i), None

        if cfg.remat == Remat.FULL:
            body = jax.checkpoint(body)
        elif cfg.remat == Remat.DOTS:
            body = jax.checkpoint(body, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
        # The cache rides in the scan carry, so each layer updates its new slots in place.
        (x, cache), _ = jax.lax.scan(body, (x, cache), (state, jnp.arange(cfg.num_layers)))
        return x, cache

    def head_weight(self) -> jax.Array:
        """LM-head weight [D, V] (the transposed embedding when tied)."""
        if self.cfg.tie_embeddings:
            return self.embed.get_value().T
        return self.lm_head.get_value()

    def logits_from_hidden(self, hidden: jax.Array) -> jax.Array:
        dt = jnp.dtype(self.cfg.dtype)
        logits = jnp.einsum("BTD,DV->BTV", hidden.astype(dt), self.head_weight().astype(dt),
                            preferred_element_type=jnp.float32)
        return constrain(logits, ("batch", "seq", "act_vocab"))          # [B, T, V]

    # --- whole forward passes -------------------------------------------------------------------
    def __call__(self, tokens: jax.Array, positions=None, segment_ids=None, attention_mask=None,
                 cache: KVCache | None = None, logits: bool = True) -> TransformerOutput:
        """tokens [B, T]; attention_mask [B, T] (False = right padding) or segment_ids [B, T] (packed
        documents, 0 = padding); positions [B, T] (default: counted within each document, or the cache
        slots the tokens are written at). logits=False skips the LM head (output.logits is None): the
        fused log-prob losses and the reward head read the hidden states instead."""
        if attention_mask is None:
            attention_mask = (segment_ids != 0) if segment_ids is not None else jnp.ones(tokens.shape, bool)
        mask = self_attention_mask(attention_mask, segment_ids)
        if positions is None:
            positions = default_positions(attention_mask, segment_ids) if cache is None else \
                cache.slots(tokens.shape[1])
        x, new_cache = self.apply_layers(self.embed_tokens(tokens), positions, mask, cache)
        hidden = self.final_norm(x)
        return TransformerOutput(self.logits_from_hidden(hidden) if logits else None, hidden,
                                 None if cache is None else new_cache.advance(attention_mask))

    def init_cache(self, batch: int, max_len: int, dtype=None) -> KVCache:
        return KVCache.zeros(self.cfg, batch, max_len, dtype)


class RewardModel(nnx.Module):
    """Transformer backbone + scalar head (Bradley–Terry reward model, HF `*ForSequenceClassification`).

    Returns one reward per row, read at the row's last valid token: [B] float32.
    """

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        self.backbone = Transformer(cfg, rngs, lm_head=False)
        self.score = param(rngs, (cfg.d_model,), ("embed",), jnp.dtype(cfg.param_dtype), cfg.d_model ** -0.5)

    def token_rewards(self, tokens, attention_mask=None, positions=None, segment_ids=None) -> jax.Array:
        hidden = self.backbone(tokens, positions, segment_ids, attention_mask, logits=False).hidden
        return jnp.einsum("BTD,D->BT", hidden.astype(jnp.float32),
                          self.score.get_value().astype(jnp.float32))      # [B, T]

    def __call__(self, tokens: jax.Array, attention_mask: jax.Array | None = None) -> jax.Array:
        if attention_mask is None:
            attention_mask = jnp.ones(tokens.shape, bool)
        per_token = self.token_rewards(tokens, attention_mask)
        # Last valid token of each (right-padded) row.
        last = jnp.maximum(attention_mask.astype(jnp.int32).sum(-1) - 1, 0)
        return jnp.take_along_axis(per_token, last[:, None], axis=1)[:, 0]   # [B]
