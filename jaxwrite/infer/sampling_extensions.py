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
                 vocab: int, size: int) -> dict[str, np.ndarray]:
    """Host arrays of RowExtras for `size` rows, the first len(params) of them sample rows (row i: its
    params and prompt); padding rows get no stop tokens (they are finished already)."""
    flags = np.zeros((size, vocab), np.uint8)                                    # [batch, vocab]
    eos = np.asarray([int(t) for t in eos if 0 <= int(t) < vocab], np.int64)
    for row, (p, prompt) in enumerate(zip(params, prompts)):
        if not p.ignore_eos:
            flags[row, eos] |= STOP
        if p.stop_token_ids:
            flags[row, np.asarray(p.stop_token_ids, np.int64)] |= STOP
        if p.repetition_penalty != 1.0:
            flags[row, np.asarray(prompt, np.int64)] |= SEEN
    pad = size - len(params)
    return dict(flags=flags,
                min_p=np.array([p.min_p for p in params] + [0.0] * pad, np.float32),
                penalty=np.array([p.repetition_penalty for p in params] + [1.0] * pad, np.float32),
                min_new=np.array([p.min_tokens for p in params] + [0] * pad, np.int32))


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
