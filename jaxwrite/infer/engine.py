"""`Engine`: batched generation with a KV cache, group sampling, stop strings and constrained JSON.

How long outputs stay cheap (figures: docs/BENCHMARKS.md, from benchmarks/decode.py):
- decode runs K steps (default 32) per jitted `lax.scan` call, so the host syncs once per chunk;
- the cache starts at the smallest power of two holding the prompt plus one chunk and is copied into
  the next power of two only when a live row needs it (never past the context limit): samples that
  stop early never pay for a max-length cache, and each (batch, cache) bucket compiles once, never per
  output length;
- attention reads only the cache's filled key blocks (models/attention_cache.py) and each decode step
  writes its one new slot per row in place (the cache is donated), so a step costs the weights plus
  the filled cache, whatever the bucket;
- when at most half the rows are still live, the batch is compacted into the next smaller
  power-of-two bucket, so finished samples stop costing compute;
- continuous batching: between chunks, waiting requests are prefilled on their own and merged into
  the rows that finished, so a long sample never holds the requests behind it.
- on CPU, prompts admitted together prefill in groups (a long prompt alone, longest first) whose rows are
  then written into one batch cache, instead of one batch padded to the longest prompt and a power of two.
Group sampling: the n samples of a request share one prefill; the prompt's cache rows are broadcast.
Results come out of `stream()` as each sample finishes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxwrite.infer import steps
from jaxwrite.infer.decode_model import Caches, DecodeModel, layer_bytes
from jaxwrite.infer.feeds import ListFeed, RequestFeed
from jaxwrite.infer.placement import home_sharding
from jaxwrite.infer.prefill_plan import MIN_PREFILL_CHUNK, PREFILL_ROWS, PrefillPlanner
from jaxwrite.infer.prefill_plan import pow2 as _pow2
from jaxwrite.infer.requests import (Completion, FinishReason, GenerationRequest, SampleState, TokenLogprob,
                                     host_logprobs)
from jaxwrite.infer.sampling import sample_keys
from jaxwrite.infer.sampling_extensions import build_extras
from jaxwrite.infer.token_constraint import ConstraintLimits, ConstraintSet, Layout
from jaxwrite.models import KVCache
from jaxwrite.parallel import DECODE_RULES, DEFAULT_RULES, logical_sharding, state_shardings, use_mesh_rules


@dataclasses.dataclass
class EngineStats:
    prefill_calls: int = 0    # batched prefills (one per admission of requests into the batch)
    prefill_rows: int = 0     # prompts prefilled (a group of n samples counts once)
    decode_chunks: int = 0
    decode_row_steps: int = 0  # batch slots × steps actually run (padding and finished rows included)
    active_row_steps: int = 0  # of those, the row-steps of rows still generating (the rest is long-tail waste)
    prefill_seconds: float = 0.0   # wall time in admissions: prefill and the first token (synced on the host)
    decode_seconds: float = 0.0    # wall time in decode chunks (dispatch to the host holding their tokens)


TextCallback = Callable[[int, int, str], None]  # (request_index, sample_index, new_text)


# Default ceiling for the unrolled CPU decode path's extra copy of the layer weights: a 0.5B model in
# fp32 fits; larger models keep the layer scan rather than double their host memory.
UNROLL_MAX_BYTES = 2 * 2**30

class Engine:
    """Generates from one model and tokenizer; optionally sharded over `mesh` (data and tensor axes).
    The caller's model is never changed: with a mesh the engine places its own copy of the parameters
    (arrays the mesh already holds as it wants them are shared, not copied).

    max_batch: sample rows decoded together; chunk_steps: decode steps per jitted call (host syncs
    once per chunk); prefill_chunk: prompt tokens per prefill call (bounds attention memory for long
    prompts); max_context: prompt + output limit (default cfg.max_seq_len).

    unroll_layers: run layers unrolled on a per-layer copy of their weights and a per-layer KV cache
    (see decode_model.py). Default: on CPU when the layer weights take at most UNROLL_MAX_BYTES, since
    a layer scan there copies every layer's weight slice on every decode step; bigger models and
    accelerators keep the scan (the copy would double layer-weight memory).

    cache_sized_prefill: shrink prefill chunks (by halves, never below MIN_PREFILL_CHUNK) so each
    call's rows and attention scores stay within PREFILL_ROWS / PREFILL_SCORES. Default: on CPU.

    constraint_limits: the state and time budget of one JSON-schema compilation and the size of the
    compiled-schema cache (token_constraint.ConstraintLimits).
    """

    def __init__(self, model, tokenizer, *, mesh=None, max_batch: int = 32, chunk_steps: int = 32,
                 prefill_chunk: int = 512, max_context: int | None = None,
                 eos_ids: Sequence[int] | None = None, unroll_layers: bool | None = None,
                 cache_sized_prefill: bool | None = None, constraint_limits: ConstraintLimits | None = None):
        self.tokenizer = tokenizer
        self.cfg = model.cfg
        self.mesh = mesh
        self.model = model
        if unroll_layers is None:
            unroll_layers = jax.default_backend() == "cpu" and layer_bytes(model) <= UNROLL_MAX_BYTES
        self.unroll_layers = bool(unroll_layers)
        if cache_sized_prefill is None:
            cache_sized_prefill = jax.default_backend() == "cpu"
        self.cache_sized_prefill = bool(cache_sized_prefill)
        self.refresh_params()
        self.max_batch = max_batch
        self.chunk_steps = chunk_steps
        self.prefill_chunk = prefill_chunk
        self.max_context = max_context or self.cfg.max_seq_len
        # End-of-sequence ids: the tokenizer's (generation_config first) unless overridden.
        self._eos = np.asarray(sorted(eos_ids if eos_ids is not None else tokenizer.eos_ids), np.int32)
        self.constraints = ConstraintSet(tokenizer, self.cfg.vocab_size, self._eos, constraint_limits)
        self.stats = EngineStats()

    def refresh_params(self, params: nnx.State | None = None) -> None:
        """Re-reads the model's parameters (after a training step updated them in place); the engine
        decodes from its own split (and, with a mesh, placed) copy, so the model itself is not changed.
        params: decode from this state of the model's graph instead (e.g. a snapshot of the weights an
        RL rollout is bound to while training moves on); with a mesh it is placed there. Returns once the
        engine's copy is in place (a caller timing a weight sync sees the transfer)."""
        graphdef, current = nnx.split(self.model)
        params = current if params is None else params
        if self.mesh is not None:
            params = jax.device_put(params, state_shardings(params, self.mesh))
        self._home = home_sharding(params) if self.mesh is None else None
        self._decode_model = jax.block_until_ready(DecodeModel.of(graphdef, params, self.unroll_layers))

    # --- validation ------------------------------------------------------------------------
    def check(self, request: GenerationRequest) -> None:
        """Raises ValueError (one line, naming the field) if `request` cannot be generated."""
        ids = list(request.prompt_ids)
        if not ids:
            raise ValueError("field 'prompt': expected a non-empty prompt")
        if len(ids) >= self.max_context:
            raise ValueError(f"field 'prompt': {len(ids)} tokens leave no room in the "
                             f"{self.max_context}-token context")
        bad = [i for i in ids if not isinstance(i, (int, np.integer)) or not 0 <= i < self.cfg.vocab_size]
        if bad:
            raise ValueError(f"field 'prompt': token id {bad[0]!r} is outside [0, {self.cfg.vocab_size})")
        request.params.validate()
        stop_ids = [t for t in request.params.stop_token_ids if t >= self.cfg.vocab_size]
        if stop_ids:
            raise ValueError(f"field 'stop_token_ids': token id {stop_ids[0]} is outside [0, {self.cfg.vocab_size})")
        if request.json_schema is not None and (request.params.min_tokens or request.params.ignore_eos):
            # A finished schema allows only EOS: holding it back would leave nothing to sample.
            raise ValueError(f"field '{'min_tokens' if request.params.min_tokens else 'ignore_eos'}': "
                             "not supported together with a JSON schema")
        if request.logprobs is not None and not (isinstance(request.logprobs, int)
                                                 and 0 <= request.logprobs <= steps.TOP_LOGPROBS):
            raise ValueError(f"field 'logprobs': expected null or an integer in [0, {steps.TOP_LOGPROBS}]")
        if request.json_schema is not None:
            # Compiled here (the server calls check on a worker thread) and kept on the request, so the
            # decode thread never compiles, even if the cache evicted the schema in between.
            if request.constraint is None:
                request.constraint = self.constraints.compile(request.json_schema)
            tc = request.constraint
            budget = min(request.params.max_new_tokens, self.max_context - len(ids))
            if tc.min_tokens[tc.start] > budget:
                raise ValueError(f"field 'max_tokens': the schema needs at least {tc.min_tokens[tc.start]} "
                                 f"tokens, only {budget} allowed")

    # --- public API ----------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """All samples of every request, in order: result[i][g] is sample g of request i."""
        out: list[list[Completion | None]] = [[None] * max(1, r.params.n) for r in requests]
        for c in self.stream(requests):
            out[c.request_index][c.sample_index] = c
        return out  # type: ignore[return-value]

    def stream(self, requests: Sequence[GenerationRequest], on_text: TextCallback | None = None
               ) -> Iterator[Completion]:
        """Yields each sample as it finishes. Invalid requests yield one error Completion and are skipped.

        Requests join the running batch in order as its rows free up (see `serve`).
        `on_text(request_index, sample_index, delta)` receives text as it is generated (stop strings
        and partial characters held back), e.g. for server-sent events.
        """
        yield from self.serve(ListFeed(requests), on_text)

    def serve(self, feed: RequestFeed, on_text: TextCallback | None = None) -> Iterator[Completion]:
        """Continuous batching over the requests `feed` hands out (request_index is the feed's).

        Between decode chunks, requests taken from the feed fill the rows that have finished: they
        are prefilled on their own and merged into the running batch, so no request waits for a whole
        batch to drain. Returns once the feed is exhausted and every sample has finished.

        Cancellation: at every chunk boundary the engine asks a feed that has `cancelled()` which request
        indices to drop; their samples end there with FinishReason.CANCELLED (the text so far) and their
        rows are free for the next requests at once.
        """
        with self._mesh_rules():
            batch: _Batch | None = None
            exhausted = False
            while True:
                if batch is not None:
                    yield from self._cancel(batch, feed)
                live = batch.live() if batch is not None else []
                free = self.max_batch - len(live)
                if not exhausted and (free > 0 or not live):
                    taken = feed.take(free, wait=not live)
                    exhausted = taken is None
                    admitted = []
                    for index, request in taken or []:
                        try:
                            self.check(request)
                        except ValueError as err:
                            yield Completion(index, 0, "", [], FinishReason.ERROR, len(request.prompt_ids),
                                             error=str(err))
                            continue
                        admitted.append((index, request))
                    if admitted:
                        batch = yield from self._admit(batch, admitted, on_text)
                        live = batch.live() if batch is not None else []
                if live:
                    yield from self._decode(batch, on_text)
                elif exhausted:
                    return

    def _cancel(self, batch: "_Batch", feed: RequestFeed) -> Iterator[Completion]:
        """Ends the live samples of the requests the feed cancelled (their rows free up)."""
        poll = getattr(feed, "cancelled", None)
        gone = poll() if poll is not None else None
        if not gone:
            return
        for state in batch.slots:
            if state is not None and not state.finished and state.request_index in gone:
                state.finished, state.reason = True, FinishReason.CANCELLED
                yield state.completion()
        batch.rows = self._apply_stops(batch.slots, batch.rows)

    def last_logits(self, prompts: Sequence[Sequence[int]], tail: int = 1) -> np.ndarray:
        """Next-token logits [len(prompts), tail, vocab] at each prompt's last `tail` positions (the
        last one predicts the token after the prompt): chunked prefill only, no decoding."""
        out = []
        group = self.max_batch
        if self.cache_sized_prefill:   # more rows would force chunks below the row budget's floor
            group = min(group, PREFILL_ROWS // MIN_PREFILL_CHUNK)
        for start in range(0, len(prompts), group):
            part = [list(map(int, p)) for p in prompts[start:start + group]]
            with self._mesh_rules():
                _, logits = self._prefill(part, tail)
            out.append(np.asarray(logits)[:len(part)])
        return np.concatenate(out)

    # --- placement and chunked prefill ----------------------------------------------------------
    def _mesh_rules(self, rules=DEFAULT_RULES):
        return use_mesh_rules(self.mesh, rules) if self.mesh is not None else contextlib.nullcontext()

    def _place(self, x, axes):
        if self.mesh is None:
            return jnp.asarray(x) if self._home is None else jax.device_put(x, self._home)
        return jax.device_put(x, logical_sharding(axes, np.shape(x), self.mesh))

    def _prefill_plan(self, batch: int, longest: int) -> list[tuple[int, int]]:
        return self._planner().plan(batch, longest)

    def _first_chunk(self, longest: int) -> int:
        return self._planner().first_chunk(longest)

    def _prefill_groups(self, prompts: list[list[int]]) -> list[list[int]]:
        return self._planner().groups([len(p) for p in prompts], split=self.mesh is None)

    def _planner(self) -> PrefillPlanner:   # built per call: prefill_chunk is a public, settable attribute
        return PrefillPlanner(self.prefill_chunk, self.cache_sized_prefill, self.cfg.num_heads,
                              self.cfg.attention_block)

    def _cache_len(self, need: int) -> int:
        """Cache bucket for `need` slots: the next power of two, but never past the context limit
        (rounded up to the attention key block), which no row can outgrow."""
        block = self.cfg.attention_block
        return min(_pow2(need), -(-self.max_context // block) * block)

    def _prefill(self, prompts: list[list[int]], tail: int = 1):
        """Prefills prompts in chunks; returns (cache, logits [batch_bucket, tail, vocab] at each
        prompt's last `tail` positions). Every group of `_prefill_groups` fills the same cache bucket."""
        longest = max(len(p) for p in prompts)
        first_chunk = self._first_chunk(longest)
        padded_len = -(-longest // first_chunk) * first_chunk    # covers every plan (chunks only shrink)
        cache_len = self._cache_len(padded_len + self.chunk_steps)
        groups = self._prefill_groups(prompts)
        if len(groups) == 1:
            cache, hidden = self._prefill_group(prompts, tail, cache_len)
        else:
            batch = _pow2(len(prompts))
            cache = self._empty_cache(batch, cache_len)
            hidden = self._place(np.zeros((batch, tail, self.cfg.d_model), np.float32), ("batch", None, None))
            for group in groups:
                part, part_hidden = self._prefill_group([prompts[i] for i in group], tail, cache_len)
                dest = np.full(part_hidden.shape[0], batch, np.int32)   # padding rows: past the batch
                dest[:len(group)] = group
                cache, hidden = steps.place_rows(cache, part, hidden, part_hidden, self._place(dest, ("batch",)))
        self.stats.prefill_calls += 1
        self.stats.prefill_rows += len(prompts)
        return cache, steps.head_logits(self._decode_model, hidden)

    def _empty_cache(self, batch: int, cache_len: int) -> Caches:
        return tuple(KVCache(self._place(c.k, steps.CACHE_AXES), self._place(c.v, steps.CACHE_AXES),
                             self._place(c.lengths, ("cache_batch",)))
                     for c in self._decode_model.empty_caches(self.cfg, batch, cache_len))

    def _prefill_group(self, prompts: list[list[int]], tail: int, cache_len: int):
        """Prefills prompts as one batch (rows padded to a power of two) into a cache of cache_len
        slots; returns (cache, final-norm hidden states [batch, tail, D] at the last `tail` positions)."""
        longest = max(len(p) for p in prompts)
        first_chunk = self._first_chunk(longest)
        padded_len = -(-longest // first_chunk) * first_chunk
        batch = _pow2(len(prompts))
        tokens = np.zeros((batch, padded_len), np.int32)                       # [batch, seq]
        mask = np.zeros((batch, padded_len), bool)
        for i, p in enumerate(prompts):
            tokens[i, :len(p)] = p
            mask[i, :len(p)] = True
        lengths = np.array([len(p) for p in prompts] + [1] * (batch - len(prompts)))
        tail_pos = np.maximum(lengths[:, None] - tail + np.arange(tail)[None, :], 0).astype(np.int32)
        cache = self._empty_cache(batch, cache_len)
        hidden = self._place(np.zeros((batch, tail, self.cfg.d_model), np.float32), ("batch", None, None))
        for start, chunk in self._prefill_plan(batch, longest):
            cache, hidden = steps.prefill_chunk(
                self._decode_model, cache,
                self._place(tokens[:, start:start + chunk], ("batch", None)),
                self._place(mask[:, start:start + chunk], ("batch", None)), hidden,
                self._place(tail_pos, ("batch", None)), jnp.int32(start))
        return cache, hidden

    # --- continuous batching: admit (prefill + merge), decode chunks, compact --------------------
    def _admit(self, batch: "_Batch | None", admitted: list[tuple[int, GenerationRequest]], on_text):
        """Prefills `admitted` (one prefill per prompt, broadcast to its n sample rows), samples their
        first tokens and merges their live rows after the running batch's live rows. Generator: yields
        samples that finish on their first token; returns the new batch (None if nothing is live)."""
        began = time.perf_counter()
        prompts = [list(map(int, r.prompt_ids)) for _, r in admitted]
        cache, logits = self._prefill(prompts)
        logits = logits[:, -1]                                                  # [batch, vocab]
        # Sample rows: (admitted position, sample index); padded to a power of two with finished rows.
        pairs = [(w, g) for w, (_, r) in enumerate(admitted) for g in range(r.params.n)]
        size = _pow2(len(pairs))
        source = np.array([w for w, _ in pairs] + [0] * (size - len(pairs)), np.int32)
        cache, logits = steps.expand_rows(cache, logits, self._place(source, ("batch",)))
        # One constraint table for the live rows' schemas and the new ones (live rows' states move);
        # the running batch's table is kept when the layout is unchanged (it is [states, vocab]).
        running = [batch.slots[i] for i in batch.live()] if batch is not None else []
        starts, offsets = self.constraints.layout(
            [s.request.constraint for s in running] + [r.constraint for _, r in admitted])
        if running and batch.offsets == offsets:
            tables = batch.tables
        else:
            table, dist = self.constraints.state_table(offsets)
            tables = steps.Tables(self._place(table, (None, None)), self._place(dist, (None,)),
                                  self._place(self._eos, (None,)))
        rows = self._initial_rows(admitted, pairs, size, starts[len(running):])
        rows, lp = steps.first_tokens(logits, rows, tables, _mode([r for _, r in admitted]))
        slots = [SampleState(admitted[w][0], g, admitted[w][1], len(prompts[w]), self.tokenizer,
                              stream=on_text is not None) for w, g in pairs] + [None] * (size - len(pairs))
        first = np.asarray(rows.token)[:, None]
        self.stats.prefill_seconds += time.perf_counter() - began
        yield from self._absorb(slots, first, np.ones_like(first, bool), rows, on_text,
                                host_logprobs(lp, first_step=True))
        fresh = _Batch(cache, self._apply_stops(slots, rows), tables, offsets, slots)
        if not running:
            return fresh if fresh.live() else None
        if batch.offsets != offsets:
            mapping = self.constraints.state_map(batch.offsets, offsets, batch.tables.next_state.shape[0])
            batch.rows = steps.remap_states(batch.rows, self._place(mapping, (None,)))
        return self._merge(batch, fresh)

    def _merge(self, old: "_Batch", fresh: "_Batch") -> "_Batch":
        """One batch holding old's live rows, then fresh's, padded to a power of two (fresh's tables)."""
        a, b = old.live(), fresh.live()
        size = _pow2(len(a) + len(b))
        length = max(old.cache[0].max_len, fresh.cache[0].max_len)
        caches = [c if c[0].max_len == length else steps.grow_cache(c, length) for c in (old.cache, fresh.cache)]
        index = np.array(a + [len(old.slots) + i for i in b] + [a[0]] * (size - len(a) - len(b)), np.int32)
        keep = np.arange(size) < len(a) + len(b)
        cache, rows = steps.merge_rows(caches[0], old.rows, caches[1], fresh.rows,
                                       self._place(index, ("batch",)), self._place(keep, ("batch",)))
        slots = [old.slots[i] for i in a] + [fresh.slots[i] for i in b] + [None] * (size - len(a) - len(b))
        return _Batch(cache, rows, fresh.tables, fresh.offsets, slots)

    def _decode(self, batch: "_Batch", on_text) -> Iterator[Completion]:
        """One decode chunk over the batch (compacted first when at most half its rows are live)."""
        began = time.perf_counter()
        self._compact(batch)
        self._ensure_room(batch)
        with self._mesh_rules(DECODE_RULES):   # weight-stationary steps (parallel.rules)
            batch.cache, rows, tokens, emitted, lp = steps.decode_chunk(
                self._decode_model, batch.cache, batch.rows, batch.tables,
                self.chunk_steps, _mode([batch.slots[i].request for i in batch.live()]))
        self.stats.decode_chunks += 1
        self.stats.decode_row_steps += len(batch.slots) * self.chunk_steps
        tokens, emitted = np.asarray(tokens).T, np.asarray(emitted).T       # [batch, steps]
        self.stats.active_row_steps += int(emitted.sum())
        self.stats.decode_seconds += time.perf_counter() - began
        yield from self._absorb(batch.slots, tokens, emitted, rows, on_text, host_logprobs(lp))
        batch.rows = self._apply_stops(batch.slots, rows)

    def _initial_rows(self, admitted, pairs, size: int, starts: list[int]) -> steps.Rows:
        pad = size - len(pairs)
        params = [admitted[w][1].params for w, _ in pairs]
        seeds = {w: admitted[w][1].params.resolved_seed() for w in {w for w, _ in pairs}}
        budget = [min(p.max_new_tokens, self.max_context - len(admitted[w][1].prompt_ids))
                  for p, (w, _) in zip(params, pairs)]
        keys = sample_keys([seeds[w] for w, _ in pairs] + [0] * pad, [g for _, g in pairs] + [0] * pad)
        b = ("batch",)
        return steps.Rows(
            token=self._place(np.zeros(size, np.int32), b),
            done=self._place(np.array([False] * len(pairs) + [True] * pad), b),
            generated=self._place(np.zeros(size, np.int32), b),
            max_new=self._place(np.array(budget + [1] * pad, np.int32), b),
            keys=self._place(keys, ("batch", None)),
            temperature=self._place(np.array([p.temperature for p in params] + [0.0] * pad, np.float32), b),
            top_p=self._place(np.array([p.top_p for p in params] + [1.0] * pad, np.float32), b),
            top_k=self._place(np.array([p.top_k or 0 for p in params] + [0] * pad, np.int32), b),
            cstate=self._place(np.array([starts[w] for w, _ in pairs] + [0] * pad, np.int32), b),
            extras=jax.tree.map(lambda x: self._place(x, ("batch",) + (None,) * (x.ndim - 1)), build_extras(
                params, [admitted[w][1].prompt_ids for w, _ in pairs], self._eos, self.cfg.vocab_size, size)))

    def _absorb(self, slots, tokens, emitted, rows, on_text, logprobs=None) -> Iterator[Completion]:
        """Hands each live slot its new tokens (and their logprobs [batch, steps, ...] when computed);
        yields the samples that finished."""
        done = np.asarray(rows.done)
        for slot, state in enumerate(slots):
            if state is None or state.finished:
                continue
            kept = [j for j, e in enumerate(emitted[slot]) if e]
            entries = sampled = None
            if logprobs is not None and logprobs.chosen is not None and state.request.logprobs is not None:
                chosen, top_lp, top_id = logprobs.chosen, logprobs.top_logprob, logprobs.top_token
                k = state.request.logprobs
                entries = [TokenLogprob(int(tokens[slot][j]), float(chosen[slot][j]),
                                        [(int(t), float(v)) for t, v in zip(top_id[slot][j][:k], top_lp[slot][j][:k])])
                           for j in kept]
            if logprobs is not None and logprobs.sampled is not None and state.request.sample_logprobs:
                sampled = logprobs.sampled[slot][kept]
            state.add([int(tokens[slot][j]) for j in kept], self._eos, bool(done[slot]), entries, sampled)
            if on_text is not None and not state.finished:
                delta = state.pending_text()
                if delta:
                    on_text(state.request_index, state.sample_index, delta)
            if state.finished:
                yield from self._finish(state, on_text)

    def _finish(self, state: "SampleState", on_text) -> Iterator[Completion]:
        completion = state.completion()
        if on_text is not None:
            delta = state.pending_text(final=True)
            if delta:
                on_text(state.request_index, state.sample_index, delta)
        yield completion

    def _apply_stops(self, slots, rows) -> steps.Rows:
        """Finishes on device the rows whose text hit a stop string on the host."""
        stop = np.array([s is not None and s.finished for s in slots])
        if stop.any():
            rows = steps.mark_done(rows, self._place(stop, ("batch",)))
        return rows

    def _compact(self, batch: "_Batch") -> None:
        live = batch.live()
        target = _pow2(len(live))
        if target * 2 > len(batch.slots):
            return
        index = np.array(live + [live[0]] * (target - len(live)), np.int32)
        keep = np.arange(target) < len(live)
        batch.cache, batch.rows = steps.gather_rows(batch.cache, batch.rows, self._place(index, ("batch",)),
                                                    self._place(keep, ("batch",)))
        batch.slots = [batch.slots[i] for i in live] + [None] * (target - len(live))

    def _ensure_room(self, batch: "_Batch") -> None:
        lengths = np.asarray(batch.cache[0].lengths)
        need = int(lengths[batch.live()].max()) + self.chunk_steps
        size = self._cache_len(need)
        if size > batch.cache[0].max_len:
            batch.cache = steps.grow_cache(batch.cache, size)


def _mode(requests: Sequence[GenerationRequest]) -> steps.Mode:
    """What the live rows need: sampling, constraints, logprobs (finished rows need none)."""
    return steps.Mode(sampled=any(r.params.temperature > 0 for r in requests),
                      constrained=any(r.json_schema is not None for r in requests),
                      logprobs=any(r.logprobs is not None for r in requests),
                      extended=any(r.params.extended for r in requests),
                      sample_logprobs=any(r.sample_logprobs for r in requests))


@dataclasses.dataclass
class _Batch:
    """The running batch: device cache and row state, its constraint table, and each row's sample
    (None for padding). `offsets` (where each schema's states start) carry live states into the next table."""
    cache: Caches
    rows: steps.Rows
    tables: steps.Tables
    offsets: Layout
    slots: list["SampleState | None"]

    def live(self) -> list[int]:
        return [i for i, s in enumerate(self.slots) if s is not None and not s.finished]
