"""A GRPO step's time at the recipe's scale, estimated from its compiled steps, under several schedules.

    report, costs, rows, lengths = estimate_recipe(config, "v5p-128", "lognormal:median=4000,sigma=0.7", rm_config)
    print(describe_estimates(rows, spec, lengths))      # `jaxwrite compile ... --estimate`

or, from programs already compiled: costs_from_compiled(...) -> GrpoCosts; estimate_schedules(costs, rl,
lengths, prompt_tokens) -> [ScheduleEstimate] (sync, async, partial, ...).

Every part of a step comes from a compiled program's roofline (max(compiled matmul FLOPs / peak,
compiled HBM bytes / bandwidth), jaxwrite.aot.report): the rollout engine's decode step and prefill
chunk, the writing RM's scoring call and the update. The rollout is the engine's own batching replayed
over a length distribution (`simulate_engine`): requests admitted in order while their rows fit
`engine_max_batch` (a group is one request of G rows sharing one prefill), decode chunks of
`engine_chunk_steps` over the live rows (the batch is a power of two: compacted as rows finish), each
step's attention following the longest live row's fill, rows leaving when their sample ends.

How one compiled program stands for many shapes (the parts an ESTIMATE rests on):
- decode: compiled once (engine_max_batch rows, the largest cache bucket). Its FLOPs and bytes per step
  are read from the compiled HLO at two cache fills (loops over filled key blocks counted at run time,
  `hlo_flops` / `hlo_bytes`), linear in the blocks visited; at b rows, FLOPs and everything but the
  weights scale by b / rows (the weights are read once per step whatever the batch);
- prefill: compiled for one admission's rows and one 512-token chunk; a chunk starting at s visits
  ceil(s / block) filled key blocks (FLOPs read from the HLO at two fills, scaled by the rows admitted);
  its traffic is the report's (arguments read once, outputs written), not hlo_bytes, which is checked
  against the ideal on decode steps only (on a prefill chunk it counts whole-cache operands of fusions
  that slice them);
- RM scoring: one compiled call of the scorer's fixed batch at its longest row; a call over a shorter
  bucket costs in proportion to its length (an upper bound: attention is quadratic);
- the update: the compiled step's roofline, scaled by the step's padded row length over the compiled one.
Communication between chips, host time, cache growth copies and re-asks are left out; times are upper
bounds on speed, as every roofline figure in jaxwrite.aot is.

Schedules (rl.max_staleness, rl.partial_rollout_tokens; jaxwrite.rl.producer / pipeline):
- sync: rollout (prefill + decode) -> RM -> update, one after another on the whole slice;
- async (s >= 1): the rollout and RM run on a rollout mesh of their own (rl.rollout_mesh) while the
  update trains on the rest; a step takes the slower side plus the weight sync to the rollout mesh
  (weights per rollout chip / its ICI bandwidth). Each side's time scales as 1 / its share of the chips
  (the per-chip rate of the whole-slice program), and the share is the eighth of the slice that balances
  them best. Whether the update still fits on its smaller share is not checked here. Under a roofline a
  split never beats running the two in turn on the whole slice (max(r / f, u / (1 - f)) >= r + u): the
  overlap pays only where the parts do not scale down with the chips (communication, host time), which
  a roofline leaves out, or where it removes work, as the next two do;
- partial (K): the producer's own rounds (2P groups kept going, at most K new tokens per sample per
  round, more rounds only while fewer than P groups are done; a continued sample is re-prefilled from
  its prompt and tokens so far), run for `steps` steps from an empty pipeline; the steady-state mean of
  the later steps is reported;
- what-ifs, not jaxwrite's engine: a ragged cache pass (each row reads its own filled key blocks; the
  engine's pass follows the longest live row for every row, so mixed lengths pay for the longest), and
  a streaming engine (the next rollouts' groups take the rows the last ones free, so the drained
  batch's tail is paid once per run instead of once per step). A row's cost per visited block is the
  compiled step's per-block FLOPs and bytes over its rows.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import numpy as np

from jaxwrite.aot.rollout_lengths import sample_lengths
from jaxwrite.common import InputError

PREFILL_CHUNK = 512     # the engine's prefill chunk on accelerators


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


# --- costs of the compiled programs ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Linear:
    """value(blocks) = at0 + per_block * blocks (FLOPs or bytes per device of one call)."""
    at0: float
    per_block: float

    @staticmethod
    def through(lo: tuple[float, float], hi: tuple[float, float]) -> "Linear":
        """The line through (blocks, value) points lo and hi."""
        slope = (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] != lo[0] else 0.0
        return Linear(lo[1] - slope * lo[0], slope)

    def __call__(self, blocks: float) -> float:
        return self.at0 + self.per_block * blocks


@dataclasses.dataclass(frozen=True)
class EngineCosts:
    """Roofline seconds of the engine's decode step and prefill chunk on one slice (per device figures)."""
    peak: float                 # FLOP/s per chip
    bandwidth: float            # HBM bytes/s per chip
    decode_rows: int            # rows the decode step was compiled for
    decode_block: int           # tokens per key block of its cache pass
    decode_flops: Linear        # per step, at decode_rows
    decode_bytes: Linear        # per step, at decode_rows
    weight_bytes: float         # the part of decode_bytes every step reads whatever the rows
    prefill_rows: int
    prefill_block: int
    prefill_flops: Linear       # one PREFILL_CHUNK-token chunk of prefill_rows rows, by blocks filled before it
    prefill_bytes: Linear

    def decode_s(self, rows: int, fill: int) -> float:
        blocks, scale = -(-fill // self.decode_block), rows / self.decode_rows
        flops = scale * self.decode_flops(blocks)
        moved = self.weight_bytes + scale * (self.decode_bytes(blocks) - self.weight_bytes)
        return max(flops / self.peak, moved / self.bandwidth)

    def decode_ragged_s(self, rows: int, blocks: float) -> float:
        """A step whose cache pass visits each row's own filled blocks (`blocks` in all, over the rows)
        instead of the longest row's for every row: what the FLOPs and bytes per visited block say."""
        scale = rows / self.decode_rows
        flops = scale * self.decode_flops.at0 + self.decode_flops.per_block / self.decode_rows * blocks
        moved = (self.weight_bytes + scale * (self.decode_bytes.at0 - self.weight_bytes)
                 + self.decode_bytes.per_block / self.decode_rows * blocks)
        return max(flops / self.peak, moved / self.bandwidth)

    def prefill_s(self, rows: int, start: int) -> float:
        blocks = -(-start // self.prefill_block)
        flops = rows / self.prefill_rows * self.prefill_flops(blocks)
        return max(flops / self.peak, self.prefill_bytes(blocks) / self.bandwidth)


@dataclasses.dataclass(frozen=True)
class RMCost:
    """One compiled scoring call of the writing RM: `rows` rows of `length` tokens, `call_s` seconds."""
    rows: int
    length: int
    call_s: float

    def seconds(self, prompt_tokens: int, answers: Sequence[int]) -> float:
        """Scores every answer as RewardModelScorer does: chunks of at most length - prompt tokens,
        rows sorted by length, `rows` per call, each call padded to a power of two (>= 64, <= length)."""
        room = max(1, self.length - prompt_tokens)
        rows = []
        for n in answers:
            count = max(1, -(-n // room))
            bounds = [i * n // count for i in range(count + 1)]
            rows += [prompt_tokens + b - a for a, b in zip(bounds[:-1], bounds[1:])]
        rows.sort()
        total = 0.0
        for i in range(0, len(rows), self.rows):
            bucket = min(max(64, _pow2(rows[i:i + self.rows][-1])), self.length)
            total += self.call_s * bucket / self.length
        return total


@dataclasses.dataclass(frozen=True)
class GrpoCosts:
    engine: EngineCosts
    update_s: float             # roofline of one compiled update step
    update_seq: int             # its row length
    rm: RMCost | None           # None: no RM step was compiled (no --rm-config)
    chips: int
    ici_bandwidth: float        # bytes/s per chip between chips (the weight sync of async schedules)
    sync_bytes: float           # weights the engine holds, over the whole slice (bytes)


def costs_from_compiled(compiled: dict, chip, chips: int, attention_block: int) -> GrpoCosts:
    """GrpoCosts from `jaxwrite.aot.compile`'s programs: {step name: (Lowerable, compiled, StepReport)} for
    train_step, rollout_prefill, rollout_decode and (optionally) rm_score. attention_block: the policy's
    key block (ModelConfig.attention_block)."""
    import jax
    from jaxwrite.aot.hlo_bytes import hlo_bytes
    from jaxwrite.aot.hlo_flops import hlo_flops
    from jaxwrite.models.attention_cache import cache_block, cache_loop_trips

    missing = [n for n in ("train_step", "rollout_prefill", "rollout_decode") if n not in compiled]
    if missing:
        raise InputError(f"the GRPO step-time estimate needs the {', '.join(missing)} step(s) compiled",
                         field="--step")
    for name, (_, _, report) in compiled.items():
        if report.estimated_step_s is None and name in ("train_step", "rm_score"):
            raise InputError(f"{name} has no roofline ({report.notes or report.error}); no estimate from it",
                             field="--estimate")

    # Costs at whole key blocks filled in every row (the cache pass's loops, attention_cache.cache_loop_trips).
    def flops_at(text: str, blocks: int, per: int) -> tuple[int, float]:
        return blocks, hlo_flops(text, cache_loop_trips(blocks, 1)).flops / per

    def bytes_at(text: str, blocks: int, per: int) -> tuple[int, float]:
        return blocks, hlo_bytes(text, cache_loop_trips(blocks, 1)) / per

    step, program, _ = compiled["rollout_decode"]
    traffic, text = step.traffic, program.as_text()
    # What a weight sync moves: the engine's weights, over the whole slice.
    sync_bytes = float(sum(np.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(step.args[0].params)))
    lo, hi = (-(-f // traffic.key_block) for f in (traffic.fills[0], traffic.fills[-1]))
    decode_flops = Linear.through(flops_at(text, lo, traffic.steps), flops_at(text, hi, traffic.steps))
    decode_bytes = Linear.through(bytes_at(text, lo, traffic.steps), bytes_at(text, hi, traffic.steps))
    step, program, report = compiled["rollout_prefill"]
    cache = step.args[1][0]                                 # KVCache: k [layers, batch, kv heads, cache, dim]
    cache_len, prefill_rows = int(cache.k.shape[3]), int(step.args[2].shape[0])
    prefill_block, text = cache_block(cache_len, attention_block), program.as_text()
    prefill_flops = Linear.through(flops_at(text, 0, 1), flops_at(text, cache_len // prefill_block, 1))
    # A prefill chunk's traffic as the report counts it (its arguments read once, its outputs written):
    # hlo_bytes is checked against the ideal on decode steps only.
    prefill_bytes = Linear(float(report.argument_bytes + report.output_bytes), 0.0)
    engine = EngineCosts(chip.peak_flops, chip.hbm_bandwidth, int(compiled["rollout_decode"][0].args[2].token.shape[0]),
                         traffic.key_block, decode_flops, decode_bytes, traffic.weight_bytes,
                         prefill_rows, prefill_block, prefill_flops, prefill_bytes)
    update, _, update_report = compiled["train_step"]
    rm = None
    if "rm_score" in compiled:
        rm_step, _, rm_report = compiled["rm_score"]
        rows, length = rm_step.args[1].shape
        rm = RMCost(int(rows), int(length), rm_report.estimated_step_s)
    return GrpoCosts(engine, update_report.estimated_step_s, int(update.args[1]["tokens"].shape[-1]), rm, chips,
                     chip.ici_bandwidth, sync_bytes)


def estimate_recipe(config, topology_name: str, lengths_spec: str, rm_config=None,
                    prompt_tokens: int | None = None, progress=None, steps: int = 8):
    """Compiles a GRPO recipe's steps (jaxwrite.aot.compile) and estimates its step time under
    `default_schedules` -> (CompileReport, GrpoCosts, [ScheduleEstimate], lengths)."""
    from jaxwrite.aot.abstract import GRPO_PROMPT_TOKENS, recipe_model_config
    from jaxwrite.aot.compile import compile_recipe
    from jaxwrite.parallel.chips import parse_topology
    from jaxwrite.train import TrainConfig

    config = TrainConfig.from_recipe(config)
    if config.objective != "grpo":
        raise InputError(f"the step-time estimate is for GRPO recipes; this one trains '{config.objective}'",
                         field="--estimate")
    rl, prompt_tokens = config.rl, prompt_tokens or GRPO_PROMPT_TOKENS
    lengths = sample_lengths(lengths_spec, rl.max_new_tokens, 64 * rl.prompts_per_step * rl.group_size)
    programs: dict = {}
    report = compile_recipe(config, topology_name, only=(), prompt_tokens=prompt_tokens, progress=progress,
                            rm_config=rm_config, on_compiled=lambda s, c, r: programs.__setitem__(s.name, (s, c, r)))
    topology = parse_topology(topology_name)
    costs = costs_from_compiled(programs, topology.chip, topology.num_chips,
                                recipe_model_config(config).attention_block)
    return report, costs, estimate_schedules(costs, rl, lengths, prompt_tokens, steps=steps), lengths


# --- the engine's batching, replayed ---------------------------------------------------------------
@dataclasses.dataclass
class EngineRun:
    prefill_s: float = 0.0
    decode_s: float = 0.0
    tokens: int = 0
    row_steps: int = 0          # rows x steps decoded (the batch's power-of-two rows)
    active_row_steps: int = 0   # of which rows still generating
    slowest_sample_s: float = 0.0   # admission to last token, the longest of any sample

    @property
    def seconds(self) -> float:
        return self.prefill_s + self.decode_s


def simulate_engine(requests: Sequence[tuple[int, Sequence[int]]], costs: EngineCosts, max_batch: int,
                    chunk_steps: int, ragged: bool = False) -> EngineRun:
    """One `Engine.generate` over `requests`: (prompt tokens, new tokens of each of its samples).
    ragged: each row's attention visits its own filled blocks (not jaxwrite's engine: a what-if)."""
    run = EngineRun()
    queue = list(requests)[::-1]
    live: list[list[float]] = []           # [fill, tokens left, admitted at (s)]
    clock = 0.0
    while queue or live:
        admitted = []
        while queue and (len(live) + sum(len(s) for _, s in admitted) + len(queue[-1][1]) <= max_batch
                         or not live and not admitted):
            admitted.append(queue.pop())
        if admitted:
            rows, longest = _pow2(len(admitted)), max(p for p, _ in admitted)
            chunk = min(PREFILL_CHUNK, _pow2(longest))
            seconds = sum(costs.prefill_s(rows, start) for start in range(0, longest, chunk)) * chunk / PREFILL_CHUNK
            run.prefill_s += seconds
            clock += seconds
            for prompt, samples in admitted:
                for n in samples:          # the prefill samples each row's first token
                    run.tokens += n
                    if n > 1:
                        live.append([prompt + 1, n - 1, clock])
                    run.slowest_sample_s = max(run.slowest_sample_s, seconds)
        if not live:
            continue
        rows, fill = _pow2(len(live)), int(max(f for f, _, _ in live))
        if ragged:   # each live row's blocks at each step of the chunk (a row stays in until it ends)
            fills = np.array([f for f, _, _ in live])[:, None] + np.arange(chunk_steps)[None, :]   # [live, steps]
            blocks = (-(-fills // costs.decode_block)).sum(axis=0)                              # [steps]
            seconds = sum(costs.decode_ragged_s(rows, float(b)) for b in blocks)
        else:
            seconds = sum(costs.decode_s(rows, fill + s) for s in range(chunk_steps))
        run.decode_s += seconds
        clock += seconds
        run.row_steps += rows * chunk_steps
        for row in live:
            step = min(chunk_steps, row[1])
            run.active_row_steps += int(step)
            row[0] += step
            row[1] -= step
        done = [row for row in live if row[1] <= 0]
        for row in done:
            run.slowest_sample_s = max(run.slowest_sample_s, clock - row[2])
        live = [row for row in live if row[1] > 0]
    return run


# --- GRPO steps under a schedule ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Schedule:
    name: str
    staleness: int = 0
    partial_tokens: int = 0     # K; 0 = off
    # A streaming engine (NOT jaxwrite's loop, which starts rollout r + 1 after rollout r ends): the next
    # rollouts' samples fill the rows the last ones free, so no step pays for a drained batch's tail.
    streaming: bool = False
    # A ragged cache pass (NOT jaxwrite's engine, whose pass visits the longest live row's blocks for
    # every row): each row reads only its own filled blocks.
    ragged: bool = False


@dataclasses.dataclass
class ScheduleEstimate:
    schedule: str
    step_s: float
    prefill_s: float
    decode_s: float
    rm_s: float
    update_s: float
    weight_sync_s: float
    rollout_chips: int
    tokens: float               # new tokens generated per step (mean)
    rollout_tokens_per_s_per_chip: float
    slowest_sample_s: float
    idle_row_share: float       # decode row-steps spent on finished rows
    truncated_share: float
    rounds: float               # engine calls per step (partial: rounds)

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


def _step_parts(costs: GrpoCosts, rl, lengths: np.ndarray, schedule: Schedule, prompt_tokens: int,
                steps: int) -> dict:
    """Mean per-step parts of `steps` simulated steps (partial: the later half, after the pipeline fills)."""
    P, G, max_new = rl.prompts_per_step, rl.group_size, rl.max_new_tokens
    if schedule.streaming:
        return _streaming_parts(costs, rl, lengths, prompt_tokens, steps, schedule.ragged)
    budget = schedule.partial_tokens or max_new
    partial = 0 < schedule.partial_tokens < max_new
    target = 2 * P if partial else P
    draw = itertools.cycle(lengths)
    parked: list[list[list[int]]] = []      # groups in flight: [generated, total] per sample
    waiting: list[list[list[int]]] = []
    records = []
    for _ in range(steps):
        ready, in_flight = list(waiting), list(parked)
        parts = dict(prefill_s=0.0, decode_s=0.0, rm_s=0.0, tokens=0, row_steps=0, active=0, slowest=0.0, rounds=0)
        while len(ready) < P or (parts["rounds"] == 0 and partial):
            admit = max(0, target - len(ready) - len(in_flight))
            fresh = [[[0, int(next(draw))] for _ in range(G)] for _ in range(admit)]
            requests = [(prompt_tokens, [min(budget, t) for _, t in g]) for g in fresh]
            for g in in_flight:
                requests += [(prompt_tokens + done, [min(budget, total - done)]) for done, total in g if done < total]
            run = simulate_engine(requests, costs.engine, rl.engine_max_batch, rl.engine_chunk_steps, schedule.ragged)
            for g in in_flight:
                for s in g:
                    s[0] = min(s[1], s[0] + budget)
            for g in fresh:
                for s in g:
                    s[0] = min(s[1], budget)
            in_flight += fresh
            finished = [g for g in in_flight if all(d >= t for d, t in g)]
            in_flight = [g for g in in_flight if not all(d >= t for d, t in g)]
            if costs.rm is not None and finished:
                parts["rm_s"] += costs.rm.seconds(prompt_tokens, [t for g in finished for _, t in g])
            ready += finished
            parts["prefill_s"] += run.prefill_s
            parts["decode_s"] += run.decode_s
            parts["tokens"] += run.tokens
            parts["row_steps"] += run.row_steps
            parts["active"] += run.active_row_steps
            parts["slowest"] = max(parts["slowest"], run.slowest_sample_s)
            parts["rounds"] += 1
        trained, waiting, parked = ready[:P], ready[P:], in_flight
        longest = max(t for g in trained for _, t in g)
        parts["update_s"] = costs.update_s * _row_bucket(prompt_tokens + longest) / costs.update_seq
        parts["truncated"] = float(np.mean([t >= max_new for g in trained for _, t in g]))
        records.append(parts)
    kept = records[steps // 2:] if partial else records
    return {k: float(np.mean([r[k] for r in kept])) for k in kept[0]}


def _streaming_parts(costs: GrpoCosts, rl, lengths: np.ndarray, prompt_tokens: int, steps: int,
                     ragged: bool) -> dict:
    """`steps` rollouts' groups through one engine call, in order: the mean per step."""
    P, G = rl.prompts_per_step, rl.group_size
    draw = itertools.cycle(lengths)
    groups = [[int(next(draw)) for _ in range(G)] for _ in range(steps * P)]
    run = simulate_engine([(prompt_tokens, g) for g in groups], costs.engine, rl.engine_max_batch,
                          rl.engine_chunk_steps, ragged)
    rm = sum(costs.rm.seconds(prompt_tokens, [t for g in groups[i:i + P] for t in g])
             for i in range(0, len(groups), P)) if costs.rm is not None else 0.0
    update = [costs.update_s * _row_bucket(prompt_tokens + max(max(g) for g in groups[i:i + P])) / costs.update_seq
              for i in range(0, len(groups), P)]
    return dict(prefill_s=run.prefill_s / steps, decode_s=run.decode_s / steps, rm_s=rm / steps,
                tokens=run.tokens / steps, row_steps=run.row_steps, active=run.active_row_steps,
                slowest=run.slowest_sample_s, rounds=1.0, update_s=float(np.mean(update)),
                truncated=float(np.mean([t >= rl.max_new_tokens for g in groups for t in g])))


def _row_bucket(n: int) -> int:
    from jaxwrite.rl.rollout import length_bucket     # the update's padded row length
    return length_bucket(n)


def estimate_schedule(costs: GrpoCosts, rl, lengths: np.ndarray, schedule: Schedule, prompt_tokens: int,
                      steps: int = 8) -> ScheduleEstimate:
    parts = _step_parts(costs, rl, lengths, schedule, prompt_tokens, steps)
    rollout = parts["prefill_s"] + parts["decode_s"] + parts["rm_s"]
    update, chips, sync = parts["update_s"], costs.chips, 0.0
    if schedule.staleness == 0 or chips < 2:
        step, share = rollout + update, 1.0
    else:
        def at(rollout_chips):   # (step seconds, weight sync seconds) with this many chips rolling out
            share = rollout_chips / chips
            sync_s = costs.sync_bytes / rollout_chips / costs.ici_bandwidth
            return max(rollout / share, update / (1 - share) + sync_s), sync_s
        # Eighths of the slice (any count on a slice of fewer than 8 chips).
        counts = sorted({chips * k // 8 for k in range(1, 8)} - {0}) if chips >= 8 else range(1, chips)
        best = min(counts, key=lambda c: at(c)[0])
        (step, sync), share = at(best), best / chips
    scale = 1 / share                      # each rollout part runs on `share` of the chips
    rollout_chips = round(share * chips)
    decode_prefill = (parts["prefill_s"] + parts["decode_s"]) * scale
    return ScheduleEstimate(
        schedule.name, step, parts["prefill_s"] * scale, parts["decode_s"] * scale, parts["rm_s"] * scale,
        update / (1 - share) if share < 1 else update, sync, rollout_chips, parts["tokens"],
        parts["tokens"] / decode_prefill / rollout_chips if decode_prefill else 0.0, parts["slowest"] * scale,
        1 - parts["active"] / parts["row_steps"] if parts["row_steps"] else 0.0, parts["truncated"],
        parts["rounds"])


def default_schedules(rl) -> list[Schedule]:
    """sync, async s = 1, partial rollouts at K = max_new / 8 and / 4 (rounded to the chunk), alone and
    with s = 1, and what a ragged cache pass and a streaming engine would reach (Schedule's what-ifs)."""
    chunk = rl.engine_chunk_steps
    ks = sorted({max(chunk, rl.max_new_tokens // d // chunk * chunk) for d in (8, 4)})
    out = [Schedule("sync"), Schedule("async s=1", staleness=1)]
    for k in ks:
        out += [Schedule(f"partial K={k}", partial_tokens=k), Schedule(f"partial K={k} + async s=1", 1, k)]
    # What-ifs (not jaxwrite's engine): the decode work the engine's design leaves on the table.
    return out + [Schedule("sync, ragged cache pass (not in jaxwrite)", ragged=True),
                  Schedule("streaming engine + async s=1 (not in jaxwrite)", 1, streaming=True),
                  Schedule("streaming + ragged + async s=1 (not in jaxwrite)", 1, streaming=True, ragged=True)]


def estimate_schedules(costs: GrpoCosts, rl, lengths: np.ndarray, prompt_tokens: int,
                       schedules: Sequence[Schedule] | None = None, steps: int = 8) -> list[ScheduleEstimate]:
    return [estimate_schedule(costs, rl, lengths, s, prompt_tokens, steps)
            for s in (schedules or default_schedules(rl))]


def describe_estimates(rows: Sequence[ScheduleEstimate], lengths_spec: str, lengths: np.ndarray) -> str:
    """A Markdown table (the terminal's and docs/TPU.md's)."""
    mean, p50, p90 = float(np.mean(lengths)), float(np.median(lengths)), float(np.quantile(lengths, 0.9))
    lines = [f"GRPO step-time ESTIMATE (compiled rooflines, no hardware ran this); answer lengths {lengths_spec}: "
             f"mean {mean:,.0f}, median {p50:,.0f}, p90 {p90:,.0f} tokens",
             "| schedule | step (s) | prefill | decode | RM | update | weight sync | rollout chips | "
             "rollout tok/s/chip | slowest sample (s) | idle rows | truncated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        seconds = (r.step_s, r.prefill_s, r.decode_s, r.rm_s, r.update_s, r.weight_sync_s)
        lines.append(f"| {r.schedule} | " + " | ".join(map(_seconds, seconds)) + f" | {r.rollout_chips} | "
                     f"{r.rollout_tokens_per_s_per_chip:,.0f} | {_seconds(r.slowest_sample_s)} | "
                     f"{100 * r.idle_row_share:.0f} % | {100 * r.truncated_share:.1f} % |")
    return "\n".join(lines)


def _seconds(s: float) -> str:
    return f"{s:,.0f}" if s >= 100 else f"{s:.1f}" if s >= 1 else f"{s:.2g}"
