"""The steps a recipe runs, lowered from abstract arguments: the train step every objective has, and the
engine's prefill and decode steps for recipes that generate (GRPO rollouts) or score (the critic).

Each `Lowerable` is a jitted function, its abstract arguments (shardings from the recipe's mesh and the
trainer's / engine's logical-axis rules) and the model FLOPs one call does, so a report can compare
them with what the compiler emitted; a decode step also carries the bytes one step must move at best
(`DecodeTraffic`), for the report to set beside what the compiled program moves.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxwrite.aot.abstract import (CRITIC_CONCURRENCY, CRITIC_PROMPT_TOKENS, CRITIC_VERDICT_TOKENS,
                                   AbstractRun, microbatched, train_batch)
from jaxwrite.infer import steps as engine_steps
from jaxwrite.infer.decode_model import DecodeModel
from jaxwrite.models import KVCache, ModelConfig
from jaxwrite.models.attention_cache import cache_block, cache_loop_trips
from jaxwrite.parallel import DECODE_RULES, logical_sharding, state_shardings
from jaxwrite.train import OBJECTIVES, StepFunctions
from jaxwrite.train.step import batch_shardings


@dataclasses.dataclass(frozen=True)
class DecodeTraffic:
    """What one decode step has to move per device, at best: the weights read once, the filled part of
    the KV cache read once and one new slot per row written (weight_bytes + cache_bytes (fill + 1) /
    cache_len). `fills` are the cache fills the report compares at; the compiled program's loop over
    filled key blocks runs ceil(fill / key_block) times there."""
    weight_bytes: float     # per device, as the step's arguments hold them
    cache_bytes: float      # per device, the whole cache (keys and values)
    cache_len: int
    key_block: int
    steps: int              # decode steps per compiled call
    fills: tuple[int, ...]

    def ideal(self, fill: int) -> float:
        return self.weight_bytes + self.cache_bytes * (fill + 1) / self.cache_len

    def run_time_trips(self, fill: int) -> dict:
        return cache_loop_trips(fill, self.key_block)


@dataclasses.dataclass(frozen=True)
class Lowerable:
    name: str
    fn: Callable                 # jitted
    args: tuple                  # abstract arguments
    model_flops: float           # whole-mesh model FLOPs of one call
    tokens: int                  # tokens one call processes (all devices)
    reads_per_call: int = 1      # times one call reads its arguments from HBM (decode: once per step)
    notes: str = ""
    # Trips of loops whose count is set at run time, by named scope (hlo_flops' run_time_trips): the
    # blockwise cache pass visits the key blocks of the cache fill that model_flops assumes.
    run_time_trips: dict = dataclasses.field(default_factory=dict)
    rules: tuple | None = None   # logical-axis rules the step runs under (None: the recipe's)
    traffic: DecodeTraffic | None = None   # decode steps: the bytes a step must move at best


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def train_step(run: AbstractRun, mesh: Mesh, rules, prompt_tokens: int) -> Lowerable:
    config = run.config
    objective = OBJECTIVES.get(config.objective)
    extra = objective.init_extra(config, run.model) if objective.init_extra else None
    accum = config.grad_accum_steps
    fns = StepFunctions(run.model, run.optimizer, objective.loss_fn, mesh, rules, accum, extra)
    batch, rows, seq = train_batch(config, prompt_tokens)
    batch = microbatched(batch, accum)
    shardings = batch_shardings(batch, mesh, rules, (None,) if accum > 1 else ())
    replicated = NamedSharding(mesh, PartitionSpec())
    jitted = jax.jit(fns._train_step, in_shardings=(fns.state_shardings, shardings, replicated),
                     out_shardings=(fns.state_shardings, replicated), donate_argnums=(0,))
    state = nnx.split((run.model, run.optimizer))[1]
    rng = jax.eval_shape(lambda: jax.random.key(0))
    tokens = rows * seq
    flops = objective.flops_per_token(run.model_cfg, seq) * tokens
    return Lowerable("train_step", jitted, (state, batch, rng), flops, tokens,
                     notes=f"{rows} rows x {seq} tokens, {accum} microbatch(es)")


# --- the engine's steps ---------------------------------------------------------------------------
def _forward_flops(cfg: ModelConfig, keys: int, lm_head: bool = True) -> float:
    """Forward FLOPs of one new token attending `keys` cached positions (flops_per_token averages
    seq/2 keys per query, hence 2 * keys). lm_head=False: a prefill chunk computes no logits."""
    head = 0.0 if lm_head else 2.0 * cfg.vocab_size * cfg.d_model
    return cfg.flops_per_token(2 * keys, training=False) - head


def _cache_key_blocks(cfg: ModelConfig, cache_len: int, fill: int) -> dict:
    """run_time_trips of the cache pass over a `cache_len`-slot cache filled to `fill` slots in every row:
    its loops over the key blocks holding filled slots (attention_cache.cache_loop_trips)."""
    return cache_loop_trips(fill, cache_block(cache_len, cfg.attention_block))


def _decode_model(run: AbstractRun, mesh: Mesh, rules):
    graphdef, params = nnx.split(run.model)
    return DecodeModel(graphdef, params), DecodeModel(graphdef, state_shardings(params, mesh, rules))


def _cache(cfg: ModelConfig, batch: int, max_len: int, mesh: Mesh, rules):
    cache = jax.eval_shape(lambda: KVCache.zeros(cfg, batch, max_len))
    kv = logical_sharding(engine_steps.CACHE_AXES, cache.k.shape, mesh, rules)
    lengths = logical_sharding(("cache_batch",), cache.lengths.shape, mesh, rules)
    return (cache,), (KVCache(kv, kv, lengths),)


def _device_bytes(tree, shardings) -> float:
    """Bytes of one device's shards of every array in `tree` (abstract values, their NamedShardings)."""
    leaves, sh = jax.tree.leaves(tree), jax.tree.leaves(shardings)
    return float(sum(np.prod(s.shard_shape(x.shape)) * jnp.dtype(x.dtype).itemsize for x, s in zip(leaves, sh)))


def _spec(shape, dtype):
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


def prefill_step(run: AbstractRun, mesh: Mesh, rules, batch: int, prompt: int, chunk: int, name: str) -> Lowerable:
    """The last prefill chunk of a `prompt`-token prompt (it attends the whole cache bucket)."""
    cfg = run.model_cfg
    padded = -(-prompt // chunk) * chunk
    cache_len = _pow2(padded + 32)               # the engine's first bucket: prompt + one decode chunk
    model, model_sh = _decode_model(run, mesh, rules)
    cache, cache_sh = _cache(cfg, batch, cache_len, mesh, rules)
    row = lambda shape: logical_sharding(("batch",) + (None,) * (len(shape) - 1), shape, mesh, rules)  # noqa: E731
    tokens, tail_hidden, tail_pos = (batch, chunk), (batch, 1, cfg.d_model), (batch, 1)
    args = (model, cache, _spec(tokens, np.int32), _spec(tokens, bool), _spec(tail_hidden, np.float32),
            _spec(tail_pos, np.int32), _spec((), np.int32))
    shardings = (model_sh, cache_sh, row(tokens), row(tokens), row(tail_hidden), row(tail_pos),
                 NamedSharding(mesh, PartitionSpec()))
    fn = jax.jit(engine_steps.prefill_chunk, in_shardings=shardings, donate_argnums=(1,))
    # The last chunk's tokens attend on average everything before the chunk plus half of it.
    keys = padded - chunk // 2
    return Lowerable(name, fn, args, _forward_flops(cfg, keys, lm_head=False) * batch * chunk, batch * chunk,
                     notes=f"batch {batch}, chunk {chunk} of a {prompt}-token prompt, cache {cache_len}",
                     run_time_trips=_cache_key_blocks(cfg, cache_len, padded - chunk))


def decode_step(run: AbstractRun, mesh: Mesh, rules, batch: int, cache_len: int, steps: int, name: str) -> Lowerable:
    """`steps` sampled decode steps of `batch` rows over a `cache_len`-slot cache (unconstrained)."""
    cfg = run.model_cfg
    model, model_sh = _decode_model(run, mesh, rules)
    cache, cache_sh = _cache(cfg, batch, cache_len, mesh, rules)
    rows = engine_steps.Rows(
        token=_spec((batch,), np.int32), done=_spec((batch,), bool), generated=_spec((batch,), np.int32),
        max_new=_spec((batch,), np.int32), keys=_spec((batch, 2), np.uint32),
        temperature=_spec((batch,), np.float32), top_p=_spec((batch,), np.float32),
        top_k=_spec((batch,), np.int32), cstate=_spec((batch,), np.int32))
    rows_sh = jax.tree.map(lambda s: logical_sharding(("batch",) + (None,) * (len(s.shape) - 1), s.shape,
                                                      mesh, rules), rows)
    tables = engine_steps.Tables(next_state=_spec((1, cfg.vocab_size), np.int32),
                                 min_tokens=_spec((1,), np.int32), eos=_spec((2,), np.int32))
    replicated = NamedSharding(mesh, PartitionSpec())
    tables_sh = jax.tree.map(lambda _: replicated, tables)
    mode = engine_steps.Mode(sampled=True, constrained=False, logprobs=False)
    fn = jax.jit(lambda m, c, r, t: engine_steps.decode_chunk(m, c, r, t, steps, mode),
                 in_shardings=(model_sh, cache_sh, rows_sh, tables_sh), donate_argnums=(1,))
    # Compiled under the rules the engine decodes with (parallel.DECODE_RULES: weight-stationary).
    # The engine moves rows into a cache of this size once one needs more than half of it (buckets
    # double), so a step runs over it at fills from half to full.
    traffic = DecodeTraffic(_device_bytes(model.params, model_sh.params), _device_bytes(cache, cache_sh),
                            cache_len, cache_block(cache_len, cfg.attention_block), steps,
                            (cache_len // 2, 3 * cache_len // 4, cache_len - 1))
    # Model FLOPs and the cache pass both count every row attending the full cache.
    return Lowerable(name, fn, (model, cache, rows, tables), _forward_flops(cfg, cache_len) * batch * steps,
                     batch * steps, reads_per_call=steps,
                     notes=f"batch {batch}, {steps} steps over a {cache_len}-slot cache",
                     run_time_trips=_cache_key_blocks(cfg, cache_len, cache_len - 1), rules=rules, traffic=traffic)


RM_SCORER_ROWS = 16   # RewardModelScorer's fixed batch


def rm_score_step(rm: AbstractRun, mesh: Mesh, rules, rows: int, length: int, name: str = "rm_score") -> Lowerable:
    """One call of the GRPO writing reward (rl/rm_scorer.RewardModelScorer): the RM's forward over `rows`
    rendered (prompt, answer) rows of `length` tokens, on the policy's mesh, one score per row."""
    graphdef, params = nnx.split(rm.model)
    params_sh = state_shardings(params, mesh, rules)

    def score(state, tokens, lengths):
        model = nnx.merge(graphdef, state)
        mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
        return model(tokens, attention_mask=mask)                      # [rows]

    tokens, lengths = _spec((rows, length), np.int32), _spec((rows,), np.int32)
    shardings = (params_sh, logical_sharding(("batch", None), tokens.shape, mesh, rules),
                 logical_sharding(("batch",), lengths.shape, mesh, rules))
    fn = jax.jit(score, in_shardings=shardings)
    flops = _forward_flops(rm.model_cfg, length // 2, lm_head=False) * rows * length   # a scalar head, no LM head
    return Lowerable(name, fn, (params, tokens, lengths), flops, rows * length,
                     notes=f"{rows} rows x {length} tokens ({rm.model_cfg.num_layers}-layer RM)")


def recipe_steps(run: AbstractRun, mesh: Mesh, rules, prompt_tokens: int, rm: AbstractRun | None = None
                 ) -> list[tuple[str, Callable[[], Lowerable]]]:
    """(name, builder) of what the recipe runs; each is built on demand (building costs host time).
    rm: a GRPO run's writing RM (its recipe, abstract), whose scoring call is compiled as `rm_score`."""
    config = run.config
    out = [("train_step", lambda: train_step(run, mesh, rules, prompt_tokens))]
    if config.objective == "grpo":
        rl = config.rl
        max_batch, group = rl.engine_max_batch, rl.group_size
        # One prefill per prompt (its samples share it): admissions of max_batch // group prompts.
        prefill_batch = _pow2(max(1, min(rl.prompts_per_step, max_batch // group)))
        cache_len = _pow2(prompt_tokens + rl.max_new_tokens)
        out.append(("rollout_prefill", lambda: prefill_step(run, mesh, rules, prefill_batch, prompt_tokens, 512,
                                                            "rollout_prefill")))
        out.append(("rollout_decode", lambda: decode_step(run, mesh, DECODE_RULES, max_batch, cache_len,
                                                          rl.engine_chunk_steps, "rollout_decode")))
        if rm is not None:
            from jaxwrite.rl.rm_scorer import resolve_rm_max_len
            # The scorer pads a call to the power of two holding its longest row, up to the RM's length.
            length = min(_pow2(prompt_tokens + rl.max_new_tokens),
                         resolve_rm_max_len(rl.rm_max_len, rm.model_cfg.max_seq_len))
            out.append(("rm_score", lambda: rm_score_step(rm, mesh, rules, RM_SCORER_ROWS, length)))
    if config.objective == "critic_sft":
        cache_len = _pow2(CRITIC_PROMPT_TOKENS + CRITIC_VERDICT_TOKENS)
        out.append(("scoring_prefill", lambda: prefill_step(run, mesh, rules, CRITIC_CONCURRENCY,
                                                            CRITIC_PROMPT_TOKENS, 512, "scoring_prefill")))
        out.append(("scoring_decode", lambda: decode_step(run, mesh, DECODE_RULES, CRITIC_CONCURRENCY, cache_len,
                                                          32, "scoring_decode")))
    return out


