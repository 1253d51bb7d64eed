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

from jaxwrite.infer.decode_model import Caches, DecodeModel
from jaxwrite.infer.sampling import sample_tokens
from jaxwrite.infer.sampling_extensions import RowExtras, adjust_logits, record, stops
from jaxwrite.models import KVCache
from jaxwrite.parallel import constrain

CACHE_AXES = ("layers", "cache_batch", "kv_heads", "cache_seq", "head_dim")   # KVCache.k / v [L, B, K, S, H]


def _map_kv(fn, caches: Caches, lengths: jax.Array) -> Caches:
    """Applies fn to every k / v array (batch is axis 1 of each) and gives every cache `lengths`."""
    return tuple(KVCache(fn(c.k), fn(c.v), lengths) for c in caches)


def _take_rows(x: jax.Array, index: jax.Array) -> jax.Array:
    return jnp.take(x, index, axis=1)


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
    # vLLM's extensions and each row's own stop tokens (None: the batch's `Tables.eos` end every row).
    extras: RowExtras | None = None


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Tables:
    """Constraint tables shared by the batch: next_state [states, vocab], min_tokens [states]; eos [E]."""
    next_state: jax.Array
    min_tokens: jax.Array
    eos: jax.Array


def _constrain_cache(caches: Caches) -> Caches:
    return _map_kv(lambda x: constrain(x, CACHE_AXES), caches, constrain(caches[0].lengths, ("cache_batch",)))


@dataclasses.dataclass(frozen=True)
class Mode:
    """What a batch may need, known on the host (static: one compilation per combination). Skipping
    what no row needs keeps the [batch, vocab] logits out of XLA conditionals (see sample_tokens)."""
    sampled: bool = True       # some row samples (temperature > 0)
    constrained: bool = True   # some row follows a JSON schema
    logprobs: bool = False     # some row wants token logprobs (the sampled token's and the top TOP_LOGPROBS)
    extended: bool = False     # some row uses repetition_penalty, min_p or min_tokens (Rows.extras)
    sample_logprobs: bool = False   # some row wants each sampled token's log-prob under its sampling distribution


TOP_LOGPROBS = 20   # alternatives computed per step when any row asks (the OpenAI API's most)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Logprobs:
    """Log-probabilities of the sampled tokens, each field None unless the Mode asks for it.

    chosen [batch], top_logprob / top_token [batch, TOP_LOGPROBS] (mode.logprobs): under the model's
    distribution (before temperature, top-k/p and schema masks), as the OpenAI API reports them.
    sampled [batch] (mode.sample_logprobs): under the distribution the token was drawn from,
    log_softmax(logits / T) with schema masks and penalties applied (T 1 for greedy rows), before the
    top-k / top-p / min-p truncation; with top-p 1 and none of those (GRPO's sampling) that is exactly the
    sampling distribution, and the tempered policy an RL update scores (jaxwrite.rl): like with like.
    """
    chosen: jax.Array | None = None
    top_logprob: jax.Array | None = None
    top_token: jax.Array | None = None
    sampled: jax.Array | None = None


def _logprobs(raw: jax.Array, adjusted: jax.Array, token: jax.Array, temperature: jax.Array,
              mode: Mode) -> Logprobs:
    """raw: the model's logits [batch, vocab]; adjusted: after schema masks and penalties (what is sampled)."""
    out = Logprobs()
    if mode.logprobs:
        logp = jax.nn.log_softmax(raw.astype(jnp.float32), axis=-1)
        top_logprob, top_token = jax.lax.top_k(logp, min(TOP_LOGPROBS, logp.shape[-1]))
        chosen = jnp.take_along_axis(logp, token[:, None], axis=-1)[:, 0]
        out = Logprobs(chosen, top_logprob, top_token.astype(jnp.int32))
    if mode.sample_logprobs:
        scale = jnp.where(temperature > 0, temperature, 1.0)[:, None]
        tempered = jax.nn.log_softmax(adjusted.astype(jnp.float32) / scale, axis=-1)
        out.sampled = jnp.take_along_axis(tempered, token[:, None], axis=-1)[:, 0]
    return out


def choose(logits: jax.Array, rows: Rows, tables: Tables, mode: Mode = Mode()) -> tuple[Rows, Logprobs | None]:
    """Masks logits [batch, vocab] by each row's constraint state and budget, samples, updates rows;
    with mode.logprobs or mode.sample_logprobs also returns the sampled tokens' Logprobs (else None)."""
    active = ~rows.done
    raw = logits

    def mask(logits):
        nxt = tables.next_state[rows.cstate]                              # [batch, vocab]
        remaining = rows.max_new - rows.generated                         # tokens still allowed
        reachable = tables.min_tokens[jnp.maximum(nxt, 0)] <= (remaining - 1)[:, None]
        return jnp.where((nxt >= 0) & reachable, logits, -jnp.inf)

    # Batches without constrained rows skip the [batch, vocab] table gathers (decided on the host:
    # a device-side cond would route the logits through XLA CPU's slow conditional at Qwen's vocab).
    if mode.constrained:
        logits = mask(logits)
    if mode.extended:
        logits = adjust_logits(logits, rows.extras, rows.generated)
    token = sample_tokens(logits, rows.keys, rows.generated, rows.temperature, rows.top_p, rows.top_k,
                          may_sample=mode.sampled, min_p=rows.extras.min_p if mode.extended else None)
    token = jnp.where(active, token, 0)
    cstate = jnp.where(active, tables.next_state[rows.cstate, token], rows.cstate)
    generated = rows.generated + active.astype(jnp.int32)
    hit_eos = (jnp.isin(token, tables.eos) if rows.extras is None else stops(rows.extras, token)) & active
    done = rows.done | hit_eos | (generated >= rows.max_new)
    lp = _logprobs(raw, logits, token, rows.temperature, mode) if mode.logprobs or mode.sample_logprobs else None
    extras = record(rows.extras, token, active) if mode.extended else rows.extras
    return dataclasses.replace(rows, token=jnp.where(active, token, rows.token), done=done,
                               generated=generated, cstate=cstate, extras=extras), lp


@functools.partial(jax.jit, donate_argnums=(1,))
def prefill_chunk(model: DecodeModel, cache: Caches, tokens: jax.Array, mask: jax.Array,
                  tail_hidden: jax.Array, tail_pos: jax.Array, offset: jax.Array):
    """Writes one prompt chunk (tokens / mask [B, T], right-padded) into the cache; its attention reads
    the cache's filled blocks only, so one compilation serves every chunk of a (batch, chunk, cache).

    tail_hidden [B, tail, D] keeps the final-norm hidden states at absolute positions tail_pos
    [B, tail] (the prompt's last tokens) once the chunk holding each has run.
    """
    hidden, cache = model.hidden_states(tokens, mask, cache)                        # [B, T, D]
    idx = jnp.clip(tail_pos - offset, 0, tokens.shape[1] - 1)                       # [B, tail]
    here = (tail_pos >= offset) & (tail_pos < offset + tokens.shape[1])
    picked = jnp.take_along_axis(hidden, idx[:, :, None], axis=1)                   # [B, tail, D]
    tail_hidden = jnp.where(here[:, :, None], picked.astype(tail_hidden.dtype), tail_hidden)
    return _constrain_cache(cache), tail_hidden


@functools.partial(jax.jit, donate_argnums=(0, 2))
def place_rows(cache: Caches, part: Caches, hidden: jax.Array, part_hidden: jax.Array, dest: jax.Array):
    """Writes a prefill group's rows into the whole batch's cache (same slots) and tail hidden states
    [B, tail, D]: row i of `part` goes to row dest[i] [part batch]; a dest past the batch (the group's
    padding rows) is dropped. The batch's buffers are donated, so rows are written in place."""
    def put(x, y):
        return x.at[:, dest].set(y, mode="drop")
    lengths = cache[0].lengths.at[dest].set(part[0].lengths, mode="drop")
    cache = tuple(KVCache(put(c.k, p.k), put(c.v, p.v), lengths) for c, p in zip(cache, part))
    return _constrain_cache(cache), hidden.at[dest].set(part_hidden.astype(hidden.dtype), mode="drop")


@jax.jit
def head_logits(model: DecodeModel, hidden: jax.Array) -> jax.Array:
    """Logits [B, tail, V] from hidden states [B, tail, D]."""
    return model.logits(hidden)


@jax.jit
def expand_rows(cache: Caches, logits: jax.Array, source: jax.Array):
    """Broadcasts prompt rows to sample rows: row i copies prompt source[i] (cache and logits)."""
    cache = _map_kv(lambda x: _take_rows(x, source), cache, jnp.take(cache[0].lengths, source, axis=0))
    return _constrain_cache(cache), jnp.take(logits, source, axis=0)


@functools.partial(jax.jit, static_argnums=(3,))
def first_tokens(logits: jax.Array, rows: Rows, tables: Tables, mode: Mode = Mode()
                 ) -> tuple[Rows, Logprobs | None]:
    return choose(logits, rows, tables, mode)


@functools.partial(jax.jit, static_argnums=(4, 5), donate_argnums=(1,))
def decode_chunk(model: DecodeModel, cache: Caches, rows: Rows, tables: Tables, steps: int,
                 mode: Mode = Mode()):
    """Runs `steps` decode steps. Returns (cache, rows, tokens [steps, B], emitted [steps, B],
    logprobs: Logprobs with a leading [steps] axis, or None unless mode.logprobs or mode.sample_logprobs).

    The cache is donated and carried through the step loop, and each step writes its one new slot per
    row in place (KVCache.write): no step copies the cache (tests/test_infer_decode_model.py checks
    the compiled memory). A finished row stops advancing its cache length (its attention mask is
    False), so it costs compute but never cache slots; `emitted` marks which tokens were really generated.
    """
    def step(carry, _):
        cache, rows = carry
        active = ~rows.done
        hidden, cache = model.hidden_states(rows.token[:, None], active[:, None], cache)
        rows, lp = choose(model.logits(hidden)[:, 0], rows, tables, mode)
        return (_constrain_cache(cache), rows), (rows.token, active, lp)

    (cache, rows), (tokens, emitted, lps) = jax.lax.scan(step, (cache, rows), None, length=steps)
    return cache, rows, tokens, emitted, lps


@jax.jit
def gather_rows(cache: Caches, rows: Rows, index: jax.Array, keep: jax.Array):
    """Compacts the batch to rows `index` [new_batch]; slots with keep=False become finished."""
    cache = _map_kv(lambda x: _take_rows(x, index), cache, jnp.take(cache[0].lengths, index, axis=0))
    rows = jax.tree.map(lambda x: jnp.take(x, index, axis=0), rows)
    rows = dataclasses.replace(rows, done=rows.done | ~keep)
    return _constrain_cache(cache), rows


@jax.jit
def merge_rows(cache_a: Caches, rows_a: Rows, cache_b: Caches, rows_b: Rows, index: jax.Array,
               keep: jax.Array):
    """Rows `index` [new_batch] of a's rows followed by b's (same cache length); keep as gather_rows."""
    lengths = jnp.concatenate([cache_a[0].lengths, cache_b[0].lengths])
    cache = tuple(KVCache(jnp.concatenate([a.k, b.k], axis=1), jnp.concatenate([a.v, b.v], axis=1), lengths)
                  for a, b in zip(cache_a, cache_b))
    rows = jax.tree.map(lambda x, y: jnp.concatenate([x, y]), rows_a, rows_b)
    return gather_rows(cache, rows, index, keep)


@jax.jit
def remap_states(rows: Rows, mapping: jax.Array) -> Rows:
    """Moves each row's constraint state into a rebuilt table (mapping [old_states] -> new state)."""
    return dataclasses.replace(rows, cstate=mapping[rows.cstate])


@functools.partial(jax.jit, static_argnums=(1,))
def grow_cache(cache: Caches, new_len: int) -> Caches:
    """Copies the cache into a longer bucket (slots past the old length are zero and unused)."""
    pad = [(0, 0), (0, 0), (0, 0), (0, new_len - cache[0].max_len), (0, 0)]   # the slot axis
    return _constrain_cache(_map_kv(lambda x: jnp.pad(x, pad), cache, cache[0].lengths))


@jax.jit
def mark_done(rows: Rows, stop: jax.Array) -> Rows:
    return dataclasses.replace(rows, done=rows.done | stop)
