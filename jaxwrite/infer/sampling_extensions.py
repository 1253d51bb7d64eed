"""vLLM's sampling extensions on device, per row: repetition penalty, min_tokens, stop token ids and
ignore_eos (min-p is a step of the sampler itself: sampling.min_p_filter).

Each row carries one byte per vocabulary entry (`RowExtras.flags`): SEEN marks a token that is in the
prompt or the output so far (what the repetition penalty applies to; kept only for penalised rows),
STOP a token that ends the row (EOS unless ignore_eos, and the request's stop_token_ids). So a row's
stop set is its own, and a stop token is one gather per step. Definitions (vLLM's, which match
transformers' RepetitionPenaltyLogitsProcessor and MinNewTokensLengthLogitsProcessor):

- repetition penalty p: a seen token's logit l becomes l / p when l > 0, else l * p (before
  temperature, greedy included);
- min_tokens m: every STOP token is at -inf while fewer than m tokens have been generated.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.infer.sampling import SamplingParams

SEEN, STOP = 1, 2   # bits of RowExtras.flags


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class RowExtras:
    """Per-row extension state: flags [batch, vocab] uint8 (SEEN | STOP bits); min_p, penalty [batch]
    float32 (0 / 1 = off); min_new [batch] int32 (stop tokens held back until this many are out)."""
    flags: jax.Array
    min_p: jax.Array
    penalty: jax.Array
    min_new: jax.Array


def build_extras(params: Sequence[SamplingParams], prompts: Sequence[Sequence[int]], eos: Sequence[int],
                 vocab: int, size: int) -> RowExtras:
    """RowExtras for `size` rows, the first len(params) of them sample rows (row i: its params and
    prompt); padding rows get no stop tokens (they are finished already). The [size, vocab] flags are
    built on device from the rows' few token ids (a host array would cost a transfer per admission)."""
    pad = size - len(params)
    eos = [int(t) for t in eos if 0 <= int(t) < vocab] or [vocab]           # vocab: an index that is dropped
    use_eos = np.array([not p.ignore_eos for p in params] + [False] * pad)
    stop = _padded([p.stop_token_ids for p in params], size, vocab)          # [size, S]
    seen = _padded([prompt if p.repetition_penalty != 1.0 else () for p, prompt in zip(params, prompts)],
                   size, vocab)                                               # [size, P]
    return RowExtras(flags=_flags(size, vocab, jnp.asarray(eos, jnp.int32), jnp.asarray(use_eos),
                                  jnp.asarray(stop), jnp.asarray(seen)),
                     min_p=jnp.asarray([p.min_p for p in params] + [0.0] * pad, jnp.float32),
                     penalty=jnp.asarray([p.repetition_penalty for p in params] + [1.0] * pad, jnp.float32),
                     min_new=jnp.asarray([p.min_tokens for p in params] + [0] * pad, jnp.int32))


def _padded(ids: Sequence[Sequence[int]], size: int, vocab: int) -> np.ndarray:
    """Token ids per row in [size, width] int32, width a power of two, padded with `vocab` (dropped)."""
    width = 1 << max(0, max((len(r) for r in ids), default=1) - 1).bit_length()
    out = np.full((size, width), vocab, np.int32)
    for row, r in enumerate(ids):
        out[row, :len(r)] = np.asarray(r, np.int32)
    return out


@functools.partial(jax.jit, static_argnums=(0, 1))
def _flags(size: int, vocab: int, eos: jax.Array, use_eos: jax.Array, stop: jax.Array, seen: jax.Array
           ) -> jax.Array:
    """flags [size, vocab] uint8: STOP at eos [E] for rows with use_eos [size] and at stop [size, S],
    SEEN at seen [size, P]; index `vocab` marks padding (scatter mode "drop")."""
    rows = jnp.arange(size)[:, None]
    eos_rows = jnp.where(use_eos[:, None], eos[None, :], vocab)                         # [size, E]
    empty = jnp.zeros((size, vocab), bool)
    stops = empty.at[rows, eos_rows].set(True, mode="drop").at[rows, stop].set(True, mode="drop")
    seen_mask = empty.at[rows, seen].set(True, mode="drop")       # repeats in a prompt set one bit once
    return stops.astype(jnp.uint8) * STOP | seen_mask.astype(jnp.uint8) * SEEN


def adjust_logits(logits: jax.Array, extras: RowExtras, generated: jax.Array) -> jax.Array:
    """Logits [batch, vocab] after the repetition penalty and the min_tokens hold on stop tokens;
    generated [batch]: tokens sampled so far."""
    seen = (extras.flags & SEEN) != 0
    penalty = extras.penalty[:, None]
    logits = jnp.where(seen, jnp.where(logits > 0, logits / penalty, logits * penalty), logits)
    held = ((extras.flags & STOP) != 0) & (generated < extras.min_new)[:, None]
    return jnp.where(held, -jnp.inf, logits)


def stops(extras: RowExtras, token: jax.Array) -> jax.Array:
    """Whether each row's sampled token [batch] is one of its stop tokens: [batch] bool."""
    return (jnp.take_along_axis(extras.flags, token[:, None], axis=-1)[:, 0] & STOP) != 0


def record(extras: RowExtras, token: jax.Array, active: jax.Array) -> RowExtras:
    """Marks each active row's sampled token [batch] as seen (for the repetition penalty)."""
    rows = jnp.arange(token.shape[0])
    mark = jnp.where(active, SEEN, 0).astype(extras.flags.dtype)
    return dataclasses.replace(extras, flags=extras.flags.at[rows, token].set(extras.flags[rows, token] | mark))
