"""Sampling parameters and the per-row sampler: greedy, temperature, min-p, top-k, top-p in one batch.

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

@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How to sample one request. `temperature == 0` is greedy; `top_k` 0/None and `top_p` 1 switch off.

    `n` samples share one prefill of the prompt (group sampling). `stop` strings end a sample and are
    excluded from its text. `seed` None draws a fresh seed per request.

    vLLM's extensions, as vLLM defines them (sampling_extensions.py applies them):
    `repetition_penalty` divides the positive logits (multiplies the negative ones) of every token seen
    in the prompt or the output so far (1 = off); `min_p` drops tokens whose probability after
    temperature is below min_p times the most likely token's (0 = off), before top-k/top-p;
    `min_tokens` holds back EOS, `stop_token_ids` and stop strings until that many tokens are out;
    `stop_token_ids` end a sample like EOS (left out of its text and tokens); `ignore_eos` lets EOS
    through as an ordinary token (the sample runs to max_new_tokens or a stop).
    """
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = 256
    seed: int | None = None
    n: int = 1
    stop: tuple[str, ...] = ()
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self):
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))

    @property
    def extended(self) -> bool:
        """Whether the logits need vLLM's extensions (repetition penalty, min-p, min_tokens) each step."""
        return self.repetition_penalty != 1.0 or self.min_p > 0 or self.min_tokens > 0

    def validate(self, names: dict[str, str] | None = None) -> None:
        """Raises ValueError naming the field and what was expected; `names` maps a field to the name
        the caller knows it by (the server's `max_tokens` for max_new_tokens)."""
        names = names or {}
        checks = [
            ("temperature", _is_number(self.temperature) and 0 <= self.temperature <= 100,
             "a number in [0, 100]"),
            ("top_p", _is_number(self.top_p) and 0 < self.top_p <= 1, "a number in (0, 1]"),
            ("top_k", self.top_k is None or (_is_int(self.top_k) and 0 <= self.top_k < 2 ** 31),
             "a non-negative integer or null"),
            ("max_new_tokens", _is_int(self.max_new_tokens) and 1 <= self.max_new_tokens < 2 ** 31,
             "a positive integer"),
            ("seed", self.seed is None or (_is_int(self.seed) and 0 <= self.seed < 2 ** 63),
             "a non-negative integer or null"),
            ("n", _is_int(self.n) and 1 <= self.n <= 1024, "an integer in [1, 1024]"),
            ("stop", all(isinstance(s, str) and s for s in self.stop), "a list of non-empty strings"),
            ("min_p", _is_number(self.min_p) and 0 <= self.min_p <= 1, "a number in [0, 1]"),
            ("repetition_penalty", _is_number(self.repetition_penalty) and 0 < self.repetition_penalty <= 1e6,
             "a number > 0 (1 = off)"),
            ("min_tokens", _is_int(self.min_tokens) and 0 <= self.min_tokens <= self.max_new_tokens,
             f"an integer in [0, {names.get('max_new_tokens', 'max_new_tokens')}]"),
            ("stop_token_ids", all(_is_int(t) and 0 <= t < 2 ** 31 for t in self.stop_token_ids),
             "a list of token ids (non-negative integers)"),
            ("ignore_eos", isinstance(self.ignore_eos, bool), "a boolean"),
        ]
        for field, ok, expected in checks:
            if not ok:
                raise ValueError(f"field '{names.get(field, field)}': expected {expected}, "
                                 f"got {getattr(self, field)!r}")

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


def _count(mask: jax.Array) -> jax.Array:
    """How many entries of mask [batch, vocab] are true, summed in float32 (exact below 2^24): XLA CPU's
    integer reductions fall off a cliff at Qwen vocabularies (docs/BENCHMARKS.md, sampler figures)."""
    return jnp.sum(mask.astype(jnp.float32), axis=-1)


def first_argmax(logits: jax.Array) -> jax.Array:
    """argmax over the last axis (first index on ties) as int32: a max, then the smallest index holding
    it, found as a float32 max over reversed positions (exact below 2^24 entries). Two plain float
    reductions run 4x (vocab 4k) to 9x (vocab 152k) faster than XLA CPU's (value, index) reduction
    or an integer min."""
    vocab = logits.shape[-1]
    top = jnp.max(logits, axis=-1, keepdims=True)
    reversed_pos = (vocab - jnp.arange(vocab)).astype(jnp.float32)               # first index: largest
    index = vocab - jnp.max(jnp.where(logits == top, reversed_pos, 0.0), axis=-1).astype(jnp.int32)
    return jnp.minimum(index, vocab - 1)          # an all-NaN row would match nothing


def _order_keys(x: jax.Array) -> jax.Array:
    """int32 keys that order like the float32 values x (-0.0 just below +0.0; no NaNs expected)."""
    bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
    return jnp.where(bits < 0, bits ^ jnp.int32(0x7FFFFFFF), bits)


def _from_keys(keys: jax.Array) -> jax.Array:
    return jax.lax.bitcast_convert_type(jnp.where(keys < 0, keys ^ jnp.int32(0x7FFFFFFF), keys), jnp.float32)


def _smallest_passing(values: jax.Array, passes) -> jax.Array:
    """Per row, the smallest float t (searched over float32 order, so exactly) with passes(t) [batch]
    true, where passes is monotone (false then true as t grows); values [batch, vocab] bound the search."""
    lo = _order_keys(jnp.min(values, axis=-1)) - 1      # passes(lo) may be false
    hi = _order_keys(jnp.max(values, axis=-1))           # passes(max) is true for the predicates below

    def step(_, bounds):
        lo, hi = bounds
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)          # floor((lo + hi) / 2) without overflow
        ok = passes(_from_keys(mid))
        return jnp.where(ok, lo, mid), jnp.where(ok, mid, hi)

    _, hi = jax.lax.fori_loop(0, 32, step, (lo, hi))
    # Snap to the smallest value at or above it: the search can end on a denormal that CPUs flush to
    # zero in comparisons, while the answer is always one of the values.
    t = _from_keys(hi)
    return jnp.min(jnp.where(values >= t[:, None], values, jnp.inf), axis=-1)


def filter_edges(scaled: jax.Array, top_p: jax.Array, top_k: jax.Array) -> jax.Array:
    """Smallest kept scaled logit per row [batch] for top-k then top-p, without sorting the vocabulary.

    Definition (the sorted view): rank the logits in descending order, keep the first k, softmax over
    them, keep the shortest prefix whose mass reaches top_p (the first token always stays); the edge is
    the last kept value. Equivalently, the edge is the smallest value v with fewer than k logits above
    it and probability mass above it below top_p — both monotone in v, so two 32-step bisections over
    float32 order find it exactly with [batch, vocab] passes instead of a sort (far cheaper on CPU;
    docs/BENCHMARKS.md).
    """
    vocab = scaled.shape[-1]
    finite = jnp.where(jnp.isfinite(scaled), scaled, jnp.finfo(jnp.float32).min)
    k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)                    # [batch]
    above = lambda t: _count(finite > t[:, None])                                   # noqa: E731
    kth = jax.lax.cond(jnp.any(k < vocab), lambda _: _smallest_passing(finite, lambda t: above(t) < k),
                       lambda _: jnp.min(finite, axis=-1), None)                    # k-th largest value
    weight = jnp.exp(finite - jnp.max(finite, axis=-1, keepdims=True))              # [batch, vocab]
    weight = jnp.where(jnp.isfinite(scaled), weight, 0.0)
    # Mass of the top-k positions: everything above the k-th value plus enough copies of it.
    top_mass = (jnp.sum(jnp.where(finite > kth[:, None], weight, 0.0), axis=-1)
                + (k - above(kth)) * jnp.exp(kth - jnp.max(finite, axis=-1)))
    mass_above = lambda t: jnp.sum(jnp.where(finite > t[:, None], weight, 0.0), axis=-1)  # noqa: E731
    # top_p 1 keeps the whole top k (the mass test would drop tokens whose weight rounds away).
    edge = _smallest_passing(finite, lambda t: (above(t) < k)
                             & ((top_p >= 1.0) | (mass_above(t) < top_p * top_mass)))
    return jnp.where(edge > jnp.finfo(jnp.float32).min, edge, -jnp.inf)   # all finite tokens kept


SMALL_TOP_K = 64   # rows with 0 < top_k <= this are filtered from one lax.top_k of this many entries


def _small_k_edges(scaled: jax.Array, top_p: jax.Array, top_k: jax.Array) -> jax.Array:
    """filter_edges for rows with 0 < top_k <= SMALL_TOP_K: the sorted definition applied to the
    SMALL_TOP_K largest values, which hold every kept token (cheaper than the bisection at Qwen
    vocabularies)."""
    ranked, _ = jax.lax.top_k(scaled, min(SMALL_TOP_K, scaled.shape[-1]))            # [batch, K] descending
    keep = jnp.arange(ranked.shape[-1])[None, :] < jnp.minimum(top_k, ranked.shape[-1])[:, None]
    probs = jax.nn.softmax(jnp.where(keep, ranked, -jnp.inf), axis=-1)
    keep &= ((jnp.cumsum(probs, axis=-1) - probs) < top_p[:, None]) | (top_p >= 1.0)[:, None]
    last = jnp.maximum(jnp.sum(keep, axis=-1) - 1, 0)
    return jnp.take_along_axis(ranked, last[:, None], axis=-1)[:, 0]


def _inverse_cdf(keys: jax.Array, logits: jax.Array) -> jax.Array:
    """One draw per row from softmax(logits) [batch, vocab] with one uniform per row (the token whose
    cumulative weight first exceeds u x total); never picks a zero-weight (-inf) token."""
    weight = jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True))             # [batch, vocab]
    cdf = jnp.cumsum(weight, axis=-1)
    u = jax.vmap(lambda key: jax.random.uniform(key, (), jnp.float32))(keys)      # [batch]
    token = _count(cdf <= (u * cdf[:, -1])[:, None])
    position = jnp.arange(logits.shape[-1]).astype(jnp.float32)
    last = jnp.max(jnp.where(weight > 0, position, 0.0), axis=-1)                  # last drawable token
    return jnp.minimum(token, last).astype(jnp.int32)


def min_p_filter(scaled: jax.Array, min_p: jax.Array) -> jax.Array:
    """vLLM's min-p on temperature-scaled logits [batch, vocab]: a token whose probability is below
    min_p [batch] times the most likely token's goes to -inf. p_i < min_p * p_max is exp(s_i - s_max) <
    min_p (the softmax normaliser cancels); the most likely token always stays."""
    ratio = jnp.exp(scaled - jnp.max(scaled, axis=-1, keepdims=True))                 # [batch, vocab]
    return jnp.where(ratio < min_p[:, None], -jnp.inf, scaled)


def sample_tokens(logits: jax.Array, base_keys: jax.Array, steps: jax.Array, temperature: jax.Array,
                  top_p: jax.Array, top_k: jax.Array, may_sample: bool = True,
                  min_p: jax.Array | None = None) -> jax.Array:
    """Next tokens [batch] int32 from logits [batch, vocab] (disallowed tokens already at -inf).

    base_keys [batch, 2] uint32; steps [batch] (tokens generated so far, the key's fold-in);
    temperature / top_p [batch] float32; top_k [batch] int32 (0 = off); min_p [batch] float32 (0 = off;
    None: no row uses it), applied after temperature and before top-k/top-p, as vLLM orders them.

    Top-k / top-p keep every token whose scaled logit reaches the smallest kept one (`filter_edges`;
    ties at the edge stay in), then one inverse-CDF draw over the whole vocabulary in its own order
    (one uniform per row: a Gumbel draw needs a random number per vocabulary entry, 4x the cost of
    the rest of a tiny model's step). A row without filtering therefore draws the same token whatever
    its batch needs, and a batch where no row filters (e.g. GRPO's top-p 1.0) skips the edge search.

    may_sample (static): whether some row may sample, known by the caller (the engine's Mode). The
    choice is made at trace time rather than by a `lax.cond`: a cond hands the logits to XLA CPU's
    conditional, which costs time at Qwen vocabularies even when the branch is not taken
    (docs/BENCHMARKS.md, "Sampling cost per step").
    """
    greedy = first_argmax(logits)
    if not may_sample:
        return greedy

    def draw():
        keys = jax.vmap(jax.random.fold_in)(base_keys, steps)                # [batch, 2]
        scaled = logits / jnp.maximum(temperature, 1e-6)[:, None]
        if min_p is not None:
            scaled = min_p_filter(scaled, min_p)
        filtering = (top_p < 1.0) | (top_k > 0)                              # [batch]
        small_k = (top_k > 0) & (top_k <= SMALL_TOP_K)                       # [batch]
        none = lambda _: jnp.full(filtering.shape, -jnp.inf, scaled.dtype)  # noqa: E731
        edge = jax.lax.cond(jnp.any(filtering & ~small_k),
                            lambda _: jnp.where(filtering & ~small_k, filter_edges(scaled, top_p, top_k), -jnp.inf),
                            none, None)
        edge = jax.lax.cond(jnp.any(small_k), lambda _: jnp.where(small_k, _small_k_edges(scaled, top_p, top_k), edge),
                            lambda _: edge, None)
        filtered = jnp.where(scaled >= edge[:, None], scaled, -jnp.inf)
        return _inverse_cdf(keys, filtered)

    return jnp.where(temperature > 0, draw(), greedy)
