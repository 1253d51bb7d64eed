"""A whole WritingBench scoring run on a TPU slice, estimated from the critic's compiled engine steps.

    costs = scoring_costs(config, "v6e-8", mesh=(2, 1, 4), rows=64, buckets=[4096, 8192])
    run = estimate_run(prompt_tokens, verdict_tokens=256, costs=costs, rows=64)   # -> RunEstimate

`scoring_costs` compiles the scoring engine's prefill chunk and sampled decode chunk (`steps.prefill_step`,
`steps.decode_step`: the engine's own functions, the recipe's model, the slice's compile-only devices) at
each power-of-two cache bucket the run needs, and keeps the roofline seconds of one call
(`report.from_compiled`) as a function of how much of the cache is filled: the attention pass over the cache
visits only the filled key blocks, so a call's FLOPs are linear in that fill, counted from the compiled HLO
at two fills (`hlo_flops` with `run_time_trips`) and interpolated exactly (attention_cache.cache_attention
loops over the filled key blocks at every cache size).

`estimate_run` then replays the engine's batching over the benchmark's calls in their order: `rows` prompts
are admitted together (a prefill over the longest, 512-token chunks, into the bucket holding it plus one
decode chunk), decode `verdict_tokens` sampled steps together (the bucket growing as rows need room), and
the next `rows` follow. In score_logit mode there is no decode: one prefill reads the score. Equal verdict
lengths make continuous batching the same as these admissions.

An ESTIMATE, never a measurement: the roofline takes the chip's peak FLOP/s and HBM bandwidth, leaves out
communication between chips (tensor-parallel all-reduces), host time and re-asks of unparseable verdicts,
and counts the whole cache bucket as read by each decode step. It is an upper bound on speed.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Callable, Sequence

from jaxwrite.aot.abstract import abstract_run
from jaxwrite.aot.hlo_flops import hlo_flops
from jaxwrite.aot.report import from_compiled
from jaxwrite.aot.steps import _cache_key_blocks, _pow2, decode_step, prefill_step
from jaxwrite.common import building_for
from jaxwrite.models.attention_cache import CACHE_KEY_BLOCKS_SCOPE, cache_block
from jaxwrite.parallel import DEFAULT_RULES, make_mesh, resolve_mesh_shape, use_rules_only
from jaxwrite.parallel.chips import parse_topology, topology_devices
from jaxwrite.train import TrainConfig

CHUNK = 512             # the engine's prefill chunk on accelerators
CHUNK_STEPS = 32        # decode steps per engine call


@dataclasses.dataclass(frozen=True)
class StepCost:
    """Roofline seconds of one call at cache fill f (tokens): max(flops(f) / peak, traffic / bandwidth),
    flops(f) = flops0 + slope * (key blocks visited at f); with its memory verdict."""
    flops0: float
    slope: float
    traffic_s: float
    peak: float
    block: int
    hbm_bytes: int
    fits: bool

    def seconds(self, blocks: float) -> float:
        return max((self.flops0 + self.slope * blocks) / self.peak, self.traffic_s)


@dataclasses.dataclass(frozen=True)
class BucketCosts:
    bucket: int
    prefill: StepCost     # one chunk call of `rows` rows
    decode: StepCost      # one decode step of `rows` rows (a chunk call's time / its steps)

    def prefill_s(self, start: int) -> float:
        """The chunk whose first token is at `start`: its cache pass visits the blocks holding the
        `start` slots filled before it (its own tokens attend each other apart, at a fixed cost)."""
        return self.prefill.seconds(-(-start // self.prefill.block))

    def decode_s(self, fill: int) -> float:
        return self.decode.seconds(-(-fill // self.decode.block))


def _step_cost(step, compiled, chip, fills: tuple[int, int], cfg, steps: int = 1) -> StepCost:
    """Linear FLOPs in visited key blocks from two fills (slots filled before the call); traffic as
    the report counts it."""
    text = compiled.as_text()
    (lo_fill, hi_fill) = fills
    lo = _cache_key_blocks(cfg, _cache_len(step), lo_fill)
    hi = _cache_key_blocks(cfg, _cache_len(step), hi_fill)
    lo_blocks, hi_blocks = lo[CACHE_KEY_BLOCKS_SCOPE], hi[CACHE_KEY_BLOCKS_SCOPE]   # key blocks filled
    lo_flops, hi_flops = hlo_flops(text, lo).flops, hlo_flops(text, hi).flops
    slope = (hi_flops - lo_flops) / (hi_blocks - lo_blocks) if hi_blocks != lo_blocks else 0.0
    report = from_compiled(step.name, compiled, chip, 0.0, 0.0, steps, 0.0, "")
    mem = compiled.memory_analysis()
    traffic = steps * int(mem.argument_size_in_bytes) + int(mem.output_size_in_bytes)
    block = cache_block(_cache_len(step), cfg.attention_block)
    return StepCost((lo_flops - slope * lo_blocks) / steps, slope / steps, traffic / chip.hbm_bandwidth / steps,
                    chip.peak_flops, block, report.hbm_bytes_per_device, report.fits)


def _cache_len(step) -> int:
    return int(step.args[1][0].k.shape[3])   # KVCache.k: [layers, batch, kv heads, cache, head dim]


def scoring_costs(config: TrainConfig, topology_name: str, *, mesh: Sequence[int], rows: int,
                  buckets: Sequence[int], progress: Callable[[str], None] | None = None) -> dict[int, BucketCosts]:
    """{bucket: BucketCosts}: the scoring engine's prefill and decode compiled at each cache bucket for
    `rows` rows (the engine's max_batch over every replica) on `topology_name` with `mesh` (data, fsdp,
    tensor). Needs libtpu (the `tpu` extra); no TPU."""
    topology = parse_topology(topology_name)
    devices = topology_devices(topology)
    mesh_ = make_mesh(resolve_mesh_shape(tuple(mesh), topology.num_chips), devices)
    run = abstract_run(TrainConfig.from_recipe(config))
    cfg = run.model_cfg
    out = {}
    with building_for("tpu"):
        for bucket in sorted(set(buckets)):
            prompt = bucket - CHUNK                # the last chunk of the longest prompt this bucket takes
            pre = prefill_step(run, mesh_, DEFAULT_RULES, rows, prompt, CHUNK, f"scoring_prefill@{bucket}")
            dec = decode_step(run, mesh_, DEFAULT_RULES, rows, bucket, CHUNK_STEPS, f"scoring_decode@{bucket}")
            costs = []
            # Two fills a bucket's calls span: the prefill's last chunk starts after prompt - CHUNK slots.
            for step, fills, steps in ((pre, (CHUNK, _padded(prompt) - CHUNK), 1),
                                       (dec, (CHUNK, bucket - 1), CHUNK_STEPS)):
                with use_rules_only(mesh_, DEFAULT_RULES):
                    compiled = step.fn.lower(*step.args).compile()
                costs.append(_step_cost(step, compiled, topology.chip, fills, cfg, steps))
                if progress is not None:
                    progress(f"{topology_name} {step.name}: {costs[-1].hbm_bytes / 2 ** 30:.2f} GiB per chip, "
                             f"{'fits' if costs[-1].fits else 'DOES NOT FIT'}")
            out[bucket] = BucketCosts(bucket, *costs)
    return out


def buckets_needed(prompt_tokens: Sequence[int], verdict_tokens: int, rows: int, generate: bool = True) -> list[int]:
    """Every cache bucket `estimate_run` visits for these prompts (in this order, `rows` at a time)."""
    need = set()
    for group in _groups(prompt_tokens, rows):
        longest = max(group)
        bucket = _pow2(_padded(longest) + CHUNK_STEPS)
        need.add(bucket)
        if generate:
            need.update(max(bucket, _pow2(longest + s + CHUNK_STEPS)) for s in range(0, verdict_tokens, CHUNK_STEPS))
    return sorted(need)


def _groups(prompt_tokens: Sequence[int], rows: int) -> list[Sequence[int]]:
    return [prompt_tokens[i:i + rows] for i in range(0, len(prompt_tokens), rows)]


def _padded(tokens: int) -> int:
    return -(-tokens // CHUNK) * CHUNK


@dataclasses.dataclass(frozen=True)
class RunEstimate:
    calls: int
    queries: int
    prefill_s: float
    decode_s: float
    fits: bool

    @property
    def seconds(self) -> float:
        return self.prefill_s + self.decode_s

    def as_json(self) -> dict:
        return dataclasses.asdict(self) | {"seconds": self.seconds, "minutes": self.seconds / 60,
                                           "queries_per_s": self.queries / self.seconds if self.seconds else None,
                                           "calls_per_s": self.calls / self.seconds if self.seconds else None}


def estimate_run(prompt_tokens: Sequence[int], verdict_tokens: int, costs: dict[int, BucketCosts], rows: int,
                 calls_per_query: int = 5, generate: bool = True) -> RunEstimate:
    """Seconds for every call, `rows` at a time, in the given order (see the module note)."""
    prefill = decode = 0.0
    fits = True
    for group in _groups(prompt_tokens, rows):
        longest = max(group)
        padded = _padded(longest)
        start_bucket = _pow2(padded + CHUNK_STEPS)     # the prefill's cache, which decode grows from
        first = costs[start_bucket]
        prefill += sum(first.prefill_s(start) for start in range(0, padded, CHUNK))
        fits &= first.prefill.fits
        if not generate:
            continue
        steps = -(-verdict_tokens // CHUNK_STEPS) * CHUNK_STEPS
        for s in range(steps):
            bucket = costs[max(start_bucket, _pow2(longest + (s // CHUNK_STEPS) * CHUNK_STEPS + CHUNK_STEPS))]
            decode += bucket.decode_s(longest + s)
            fits &= bucket.decode.fits
    return RunEstimate(len(prompt_tokens), math.ceil(len(prompt_tokens) / calls_per_query), prefill, decode, fits)


def length_summary(tokens: Sequence[int]) -> dict:
    """Mean, median, p90, p99 and max of a length distribution."""
    ordered = sorted(tokens)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"calls": len(ordered), "mean": statistics.fmean(ordered), "median": pick(0.5), "p90": pick(0.9),
            "p99": pick(0.99), "max": ordered[-1]}
