"""Sampling parameters and the per-row sampler: greedy, temperature, top-k, top-p in one batch.

Every row carries its own parameters and its own PRNG key. The key for a generated token is
`fold_in(key(seed, sample_index), step)`, so a request with a given seed produces the same text
wherever it sits in a batch and whatever else is batched with it.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

_NEG = -1e30


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How to sample one request. `temperature == 0` is greedy; `top_k` 0/None and `top_p` 1 switch off.

    `n` samples share one prefill of the prompt (group sampling). `stop` strings end a sample and are
    excluded from its text. `seed` None draws a fresh seed per request.
    """
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = 256
    seed: int | None = None
    n: int = 1
    stop: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "stop", tuple(self.stop))

    def validate(self) -> None:
        """Raises ValueError naming the field and what was expected."""
        checks = [
            ("temperature", _is_number(self.temperature) and 0 <= self.temperature <= 100,
             "a number in [0, 100]"),
            ("top_p", _is_number(self.top_p) and 0 < self.top_p <= 1, "a number in (0, 1]"),
            ("top_k", self.top_k is None or (_is_int(self.top_k) and self.top_k >= 0),
             "a non-negative integer or null"),
            ("max_new_tokens", _is_int(self.max_new_tokens) and self.max_new_tokens >= 1,
             "a positive integer"),
            ("seed", self.seed is None or (_is_int(self.seed) and 0 <= self.seed < 2 ** 63),
             "a non-negative integer or null"),
            ("n", _is_int(self.n) and 1 <= self.n <= 1024, "an integer in [1, 1024]"),
            ("stop", all(isinstance(s, str) and s for s in self.stop), "a list of non-empty strings"),
        ]
        for field, ok, expected in checks:
            if not ok:
                raise ValueError(f"field '{field}': expected {expected}, got {getattr(self, field)!r}")

    def resolved_seed(self) -> int:
        return self.seed if self.seed is not None else int.from_bytes(os.urandom(4), "little")


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def sample_keys(seeds: Sequence[int], sample_indices: Sequence[int]) -> np.ndarray:
    """Base keys [rows, 2] uint32: one per (request seed, sample index); 64-bit seeds are kept whole."""
    keys = []
    for seed, index in zip(seeds, sample_indices):
        key = jax.random.fold_in(jax.random.PRNGKey(seed & 0xFFFFFFFF), seed >> 32)
        keys.append(np.asarray(jax.random.fold_in(key, index)))
    return np.stack(keys).astype(np.uint32)


def first_argmax(logits: jax.Array) -> jax.Array:
    """argmax over the last axis (first index on ties) as int32: a max, then the smallest index holding
    it. Two plain reductions run ~4x faster than XLA CPU's (value, index) argmax reduction."""
    vocab = logits.shape[-1]
    top = jnp.max(logits, axis=-1, keepdims=True)
    index = jnp.min(jnp.where(logits == top, jnp.arange(vocab, dtype=jnp.int32), vocab), axis=-1)
    return jnp.minimum(index, vocab - 1)          # an all-NaN row would match nothing


def sample_tokens(logits: jax.Array, base_keys: jax.Array, steps: jax.Array, temperature: jax.Array,
                  top_p: jax.Array, top_k: jax.Array) -> jax.Array:
    """Next tokens [batch] int32 from logits [batch, vocab] (disallowed tokens already at -inf).

    base_keys [batch, 2] uint32; steps [batch] (tokens generated so far, the key's fold-in);
    temperature / top_p [batch] float32; top_k [batch] int32 (0 = off).

    Top-k / top-p keep every token whose scaled logit reaches the smallest kept one (the kept set is a
    prefix of the sorted logits; ties at its edge stay in), then one categorical draw over the whole
    vocabulary in its own order. A row without filtering therefore draws the same token whatever its
    batch needs, and a batch where no row filters (e.g. GRPO's top-p 1.0) never sorts the vocabulary.
    """
    greedy = first_argmax(logits)

    def draw(_):
        keys = jax.vmap(jax.random.fold_in)(base_keys, steps)                # [batch, 2]
        scaled = logits / jnp.maximum(temperature, 1e-6)[:, None]
        filtering = (top_p < 1.0) | (top_k > 0)                              # [batch]

        def thresholds(_):
            ranked = -jnp.sort(-scaled, axis=-1)                              # [batch, vocab] descending
            vocab = logits.shape[-1]
            rank = jnp.arange(vocab)[None, :]
            k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)
            keep = rank < k[:, None]
            probs = jax.nn.softmax(jnp.where(keep, ranked, _NEG), axis=-1)
            # The smallest prefix whose mass reaches top_p (the first token always stays).
            mass_before = jnp.cumsum(probs, axis=-1) - probs
            keep &= mass_before < top_p[:, None]
            last = jnp.sum(keep, axis=-1) - 1                                 # [batch], >= 0
            edge = jnp.take_along_axis(ranked, last[:, None], axis=-1)[:, 0]
            return jnp.where(filtering, edge, -jnp.inf)

        edge = jax.lax.cond(jnp.any(filtering), thresholds,
                            lambda _: jnp.full(filtering.shape, -jnp.inf, scaled.dtype), None)
        filtered = jnp.where(scaled >= edge[:, None], scaled, _NEG)
        return jax.vmap(jax.random.categorical)(keys, filtered).astype(jnp.int32)

    any_sampled = jnp.any(temperature > 0)
    sampled = jax.lax.cond(any_sampled, draw, lambda _: greedy, None)
    return jnp.where(temperature > 0, sampled, greedy)
