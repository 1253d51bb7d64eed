"""The engine's jitted device steps: chunked prefill, K decode steps in one `lax.scan`, row bookkeeping.

Row state (`Rows`) lives on device between chunks so the host only sees tokens once per chunk.
Shapes are bucketed by the caller (batch, prompt chunk, cache length, constraint states: powers of
two), so each function compiles once per bucket, never per output length.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.infer.sampling import sample_tokens
from jaxwrite.models import KVCache
from jaxwrite.parallel import constrain

CACHE_AXES = ("layers", "batch", "kv_heads", "cache_seq", "head_dim")   # stacked layout
LAYER_CACHE_AXES = CACHE_AXES[1:]                                       # one layer (per-layer layout)


def cache_axes(x: jax.Array) -> tuple[str, ...]:
    return CACHE_AXES if x.ndim == len(CACHE_AXES) else LAYER_CACHE_AXES


def _map_kv(fn, cache: KVCache, lengths: jax.Array) -> KVCache:
    """Applies fn to every k / v array, whichever the layout (stacked array or per-layer tuple)."""
    return KVCache(jax.tree.map(fn, cache.k), jax.tree.map(fn, cache.v), lengths)


def _take_rows(x: jax.Array, index: jax.Array) -> jax.Array:
    return jnp.take(x, index, axis=x.ndim - 4)   # the batch axis: 1 stacked, 0 per layer


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Rows:
    """Per-row decode state, all [batch]: the last sampled token, which is fed next."""
    token: jax.Array        # int32
    done: jax.Array         # bool
    generated: jax.Array    # int32, tokens sampled so far (also the PRNG fold-in step)
    max_new: jax.Array      # int32
    keys: jax.Array         # [batch, 2] uint32 base keys
    temperature: jax.Array  # float32 (0 = greedy)
    top_p: jax.Array        # float32
    top_k: jax.Array        # int32 (0 = off)
    cstate: jax.Array       # int32 constraint state (0 = unconstrained)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Tables:
    """Constraint tables shared by the batch: next_state [states, vocab], min_tokens [states]; eos [E]."""
    next_state: jax.Array
    min_tokens: jax.Array
    eos: jax.Array


def _constrain_cache(cache: KVCache) -> KVCache:
    return _map_kv(lambda x: constrain(x, cache_axes(x)), cache, constrain(cache.lengths, ("batch",)))


@dataclasses.dataclass(frozen=True)
class Mode:
    """What a batch may need, known on the host (static: one compilation per combination). Skipping
    what no row needs keeps the [batch, vocab] logits out of XLA conditionals (see sample_tokens)."""
    sampled: bool = True       # some row samples (temperature > 0)
    constrained: bool = True   # some row follows a JSON schema


def choose(logits: jax.Array, rows: Rows, tables: Tables, mode: Mode = Mode()) -> Rows:
    """Masks logits [batch, vocab] by each row's constraint state and budget, samples, updates rows."""
    active = ~rows.done

    def mask(logits):
        nxt = tables.next_state[rows.cstate]                              # [batch, vocab]
        remaining = rows.max_new - rows.generated                         # tokens still allowed
        reachable = tables.min_tokens[jnp.maximum(nxt, 0)] <= (remaining - 1)[:, None]
        return jnp.where((nxt >= 0) & reachable, logits, -jnp.inf)

    # Batches without constrained rows skip the [batch, vocab] table gathers (decided on the host:
    # a device-side cond would route the logits through an XLA conditional, ~10 ms at Qwen's vocab).
    if mode.constrained:
        logits = mask(logits)
    token = sample_tokens(logits, rows.keys, rows.generated, rows.temperature, rows.top_p, rows.top_k,
                          may_sample=mode.sampled)
    token = jnp.where(active, token, 0)
    cstate = jnp.where(active, tables.next_state[rows.cstate, token], rows.cstate)
    generated = rows.generated + active.astype(jnp.int32)
    hit_eos = jnp.isin(token, tables.eos) & active
    done = rows.done | hit_eos | (generated >= rows.max_new)
    return dataclasses.replace(rows, token=jnp.where(active, token, rows.token), done=done,
                               generated=generated, cstate=cstate)


@functools.partial(jax.jit, static_argnums=(0, 9), donate_argnums=(3,))
def prefill_chunk(graphdef, params, layer_states, cache: KVCache, tokens: jax.Array, mask: jax.Array,
                  tail_hidden: jax.Array, tail_pos: jax.Array, offset: jax.Array, kv_window: int):
    """Writes one prompt chunk (tokens/mask [batch, chunk], right-padded) into the cache.

    layer_states: per-layer weights for unrolled layers (with a per-layer cache), or None (scan).
    kv_window (static): slots attended, >= offset + chunk (a power of two, so few compilations).

    tail_hidden [batch, tail, d_model] keeps the final-norm hidden states at absolute positions
    tail_pos [batch, tail] (the prompt's last tokens) once the chunk holding each has run.
    """
    model = nnx.merge(graphdef, params)
    hidden, cache = model.hidden_states(tokens, attention_mask=mask, cache=cache, layer_states=layer_states,
                                        kv_window=kv_window)                        # [batch, chunk, d]
    idx = jnp.clip(tail_pos - offset, 0, tokens.shape[1] - 1)                       # [batch, tail]
    here = (tail_pos >= offset) & (tail_pos < offset + tokens.shape[1])
    picked = jnp.take_along_axis(hidden, idx[:, :, None], axis=1)                   # [batch, tail, d]
    tail_hidden = jnp.where(here[:, :, None], picked.astype(tail_hidden.dtype), tail_hidden)
    return _constrain_cache(cache), tail_hidden


@functools.partial(jax.jit, static_argnums=(0,))
def head_logits(graphdef, params, hidden: jax.Array) -> jax.Array:
    """Logits [batch, tail, vocab] from hidden states [batch, tail, d_model]."""
    model = nnx.merge(graphdef, params)
    return model.logits_from_hidden(hidden)


@jax.jit
def expand_rows(cache: KVCache, logits: jax.Array, source: jax.Array):
    """Broadcasts prompt rows to sample rows: row i copies prompt source[i] (cache and logits)."""
    cache = _map_kv(lambda x: _take_rows(x, source), cache, jnp.take(cache.lengths, source, axis=0))
    return _constrain_cache(cache), jnp.take(logits, source, axis=0)


@functools.partial(jax.jit, static_argnums=(3,))
def first_tokens(logits: jax.Array, rows: Rows, tables: Tables, mode: Mode = Mode()) -> Rows:
    return choose(logits, rows, tables, mode)


@functools.partial(jax.jit, static_argnums=(0, 6, 7), donate_argnums=(3,))
def decode_chunk(graphdef, params, layer_states, cache: KVCache, rows: Rows, tables: Tables, steps: int,
                 mode: Mode = Mode()):
    """Runs `steps` decode steps. Returns (cache, rows, tokens [steps, batch], emitted [steps, batch]).

    A finished row stops advancing its cache length (its attention mask is False), so it costs
    compute but never cache slots; `emitted` marks which tokens were really generated.
    """
    model = nnx.merge(graphdef, params)

    def step(carry, _):
        cache, rows = carry
        active = ~rows.done
        logits, cache = model(rows.token[:, None], attention_mask=active[:, None], cache=cache,
                              layer_states=layer_states)
        rows = choose(logits[:, 0], rows, tables, mode)
        return (_constrain_cache(cache), rows), (rows.token, active)

    (cache, rows), (tokens, emitted) = jax.lax.scan(step, (cache, rows), None, length=steps)
    return cache, rows, tokens, emitted


@jax.jit
def gather_rows(cache: KVCache, rows: Rows, index: jax.Array, keep: jax.Array):
    """Compacts the batch to rows `index` [new_batch]; slots with keep=False become finished."""
    cache = _map_kv(lambda x: _take_rows(x, index), cache, jnp.take(cache.lengths, index, axis=0))
    rows = jax.tree.map(lambda x: jnp.take(x, index, axis=0), rows)
    rows = dataclasses.replace(rows, done=rows.done | ~keep)
    return _constrain_cache(cache), rows


@jax.jit
def merge_rows(cache_a: KVCache, rows_a: Rows, cache_b: KVCache, rows_b: Rows, index: jax.Array,
               keep: jax.Array):
    """Rows `index` [new_batch] of a's rows followed by b's (same cache length); keep as gather_rows."""
    def cat(x, y):
        return jnp.concatenate([x, y], axis=x.ndim - 4)   # the batch axis: 1 stacked, 0 per layer

    cache = KVCache(jax.tree.map(cat, cache_a.k, cache_b.k), jax.tree.map(cat, cache_a.v, cache_b.v),
                    jnp.concatenate([cache_a.lengths, cache_b.lengths]))
    rows = jax.tree.map(lambda x, y: jnp.concatenate([x, y]), rows_a, rows_b)
    return gather_rows(cache, rows, index, keep)


@jax.jit
def remap_states(rows: Rows, mapping: jax.Array) -> Rows:
    """Moves each row's constraint state into a rebuilt table (mapping [old_states] -> new state)."""
    return dataclasses.replace(rows, cstate=mapping[rows.cstate])


@functools.partial(jax.jit, static_argnums=(1,))
def grow_cache(cache: KVCache, new_len: int) -> KVCache:
    """Copies the cache into a longer bucket (slots past the old length are zero and unused)."""
    def grow(x):
        pad = [(0, 0)] * x.ndim
        pad[-2] = (0, new_len - cache.max_len)   # the slot axis
        return jnp.pad(x, pad)

    return _constrain_cache(_map_kv(grow, cache, cache.lengths))


@jax.jit
def mark_done(rows: Rows, stop: jax.Array) -> Rows:
    return dataclasses.replace(rows, done=rows.done | stop)
