"""One rollout of a GRPO step: prompts -> finished groups -> rewards -> the update's arrays and metrics.

The synchronous loop takes `prompts_per_step` (P) prompts, samples G answers for each, scores them and
trains on them. Two DAPO / long-tail options change which groups a step trains on; both keep the batch
full (P groups) and both are off in the recipes unless set:

- dynamic sampling (`rl.dynamic_sampling`, DAPO): a group whose advantages are all 0 (its combined
  rewards all equal) is dropped, and more prompts are sampled, round after round, until P groups carry a
  signal; after `dynamic_sampling_max_batches` x P prompts in one step it fills up with dropped groups.
- partial rollouts (`rl.partial_rollout_tokens` = K): a step keeps 2P groups going (those parked by
  earlier steps and those done but waiting first, then new prompts) and decodes them in rounds of at most
  K new tokens per sample: one round, and more only while fewer than P groups are done. The P groups
  started first among those done train; the others wait for the next step. A sample not done is parked
  (its tokens and their sampler log-probs) and continued in the next step, re-prefilled under the new
  weights; a group enters the loss only once all its samples are done. In the steady state a step
  decodes about K tokens per sample instead of the longest sample's length, and a sample's tokens are
  at most about max_new_tokens / K updates old (logged: rollout/staleness_*).

Prompts come from one stream (position i: the i-th prompt of a seeded permutation per epoch), so the
synchronous loop takes positions r·P .. r·P+P−1 for rollout r, with the seeds it always used. What
carries from one rollout to the next (the next position, parked and waiting groups) is checkpointed
(`get_state`), so a resumed run continues exactly.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping

import numpy as np

from jaxwrite.infer import Engine
from jaxwrite.rl.algo_core import group_advantages_with_stats, group_rows, informative_groups, overlong_penalty
from jaxwrite.rl.config import RLConfig
from jaxwrite.rl.guardrails import rollout_step_metrics
from jaxwrite.rl.rewards import BatchedReward, score_groups
from jaxwrite.rl.rollout import (Group, RolloutSettings, Trajectory, advance, groups_rollout, render_prompt,
                                 rollout_arrays, rollout_samples)
from jaxwrite.rl.samples import RolloutSampleLog
from jaxwrite.rl.state_codec import pack_arrays, unpack_arrays
from jaxwrite.rl.types import RolloutPrompt


@dataclasses.dataclass
class Produced:
    """A rollout ready for the trainer: its update arrays (rows shuffled) and its metrics."""
    index: int
    batch: dict[str, np.ndarray]
    metrics: dict[str, float]


def overlong_reward(max_tokens: int, buffer: int, penalty: float) -> BatchedReward:
    """DAPO's overlong soft punishment as a reward column ('overlong'), on each sample's token count."""
    def overlong(prompts, samples) -> np.ndarray:
        return overlong_penalty([s.num_tokens for s in samples], max_tokens, buffer, penalty)   # [n]
    return overlong


class RolloutProducer:
    """Makes rollout after rollout (see module docstring); not thread-safe: one caller at a time."""

    def __init__(self, rl: RLConfig, seed: int, prompts: list[RolloutPrompt], engine: Engine,
                 settings: RolloutSettings, rewards: Mapping[str, BatchedReward], pad_id: int,
                 samples: RolloutSampleLog | None = None,
                 ref_logps: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None):
        self.rl, self.seed, self.prompts, self.engine, self.settings = rl, seed, prompts, engine, settings
        self.rewards = dict(rewards)
        if rl.overlong_buffer:
            self.rewards["overlong"] = overlong_reward(rl.max_new_tokens, rl.overlong_buffer, rl.overlong_penalty)
        self.pad_id, self.samples, self.ref_logps = pad_id, samples, ref_logps
        self.per_step = rl.prompts_per_step
        self.partial = 0 < rl.partial_rollout_tokens < rl.max_new_tokens
        self.weights = rl.reward_weights or None
        # Carried from rollout to rollout (checkpointed): the next prompt position, groups not done
        # (parked) and groups done but not trained yet (waiting), both in the order they were started.
        self.next_position = 0
        self.parked: list[Group] = []
        self.waiting: list[Group] = []
        self._orders: dict[int, np.ndarray] = {}

    # --- the prompt stream and its seeds ------------------------------------------------------------
    def prompt_at(self, position: int) -> RolloutPrompt:
        epoch, offset = divmod(position, len(self.prompts))
        if epoch not in self._orders:
            self._orders = {epoch: np.random.default_rng([self.seed, epoch]).permutation(len(self.prompts))}
        return self.prompts[self._orders[epoch][offset]]

    def seed_of(self, position: int, segment: int, sample: int) -> int:
        """The engine seed of a group's first call (all G samples) or of one sample's later call."""
        rollout, index = divmod(position, self.per_step)
        base = (self.seed * 100_003 + rollout) * 1_000_003 + index   # the synchronous loop's seeds
        if segment == 0:
            return base % 2 ** 62
        return (base + (segment << 40) + ((sample + 1) << 50)) % 2 ** 62

    def _new_group(self, position: int) -> Group:
        prompt = self.prompt_at(position)
        return Group(position, prompt, render_prompt(self.engine.tokenizer, prompt, self.settings),
                     [Trajectory() for _ in range(self.settings.group_size)])

    # --- one rollout --------------------------------------------------------------------------------
    def produce(self, index: int, version: int) -> Produced:
        """Rollout `index` with the engine's current weights, which are policy version `version`
        (rollouts trained before them); its first update step is index x updates_per_rollout + 1."""
        began = time.perf_counter()
        rl, per_step = self.rl, self.per_step
        stats0 = dataclasses.replace(self.engine.stats)
        reward_seconds = dict.fromkeys(self.rewards, 0.0)
        ready, dropped = list(self.waiting), []
        in_flight, continued = list(self.parked), sum(not t.done for g in self.parked for t in g.samples)
        target = 2 * per_step if self.partial else per_step
        budget = rl.partial_rollout_tokens if self.partial else rl.max_new_tokens
        cap = rl.dynamic_sampling_max_batches * per_step if rl.dynamic_sampling else None
        admitted = rounds = generated = 0
        gen_seconds = 0.0
        # At least one round, so a step with enough groups waiting still advances (and starts) the
        # groups the next steps train: the pipeline of partial rollouts keeps moving.
        while len(ready) < per_step or (rounds == 0 and self.partial):
            admit = max(0, target - len(ready) - len(in_flight))
            if cap is not None:
                admit = min(admit, cap - admitted)
            if not in_flight and not admit:
                break                                        # dynamic sampling's cap: fill up below
            in_flight += [self._new_group(self.next_position + i) for i in range(admit)]
            self.next_position += admit
            admitted += admit
            t0 = time.perf_counter()
            generated += advance(self.engine, in_flight, self.settings, budget, version, self.seed_of)
            gen_seconds += time.perf_counter() - t0
            rounds += 1
            finished = [g for g in in_flight if g.done]
            in_flight = [g for g in in_flight if not g.done]
            if finished:
                self._score(finished, reward_seconds)
            for group in finished:
                keep = not rl.dynamic_sampling or bool(informative_groups(group.rewards[None], rl.advantage,
                                                                          self.weights)[0])
                (ready if keep else dropped).append(group)
        filled = max(0, per_step - len(ready))
        ready += dropped[:filled]
        groups, self.waiting, self.parked = ready[:per_step], ready[per_step:], in_flight

        rewards = np.stack([g.rewards for g in groups])                                   # [P, G, R]
        names = list(self.rewards)
        advantages, stats = group_advantages_with_stats(rewards, rl.advantage, self.weights)
        samples = [rollout_samples(g, self.settings) for g in groups]
        metrics = rollout_step_metrics(rewards, names, advantages, samples, step=index,
                                       prompts=[g.prompt for g in groups], truncation_warning=rl.truncation_warning)
        metrics["rollout/zero_variance_prompts"] = float(stats["zero_variance_prompts"])
        metrics.update(self._time_metrics(stats0, generated, gen_seconds, groups, index, reward_seconds))
        if rl.dynamic_sampling:
            metrics.update({"dynamic_sampling/dropped_groups": float(len(dropped)),
                            "dynamic_sampling/prompts": float(admitted),
                            "dynamic_sampling/filled_groups": float(filled)})
        if self.partial:
            metrics.update({"partial/rounds": float(rounds), "partial/continued_samples": float(continued),
                            "partial/parked_samples": float(sum(not t.done for g in self.parked for t in g.samples)),
                            "partial/waiting_groups": float(len(self.waiting))})
        if self.samples is not None:
            self.samples.write(index, index * rl.updates_per_rollout + 1, [g.prompt for g in groups], samples,
                               rewards, names, np.asarray(advantages))
        batch = rollout_arrays(groups_rollout(groups, self.settings, generated), self.pad_id, rl.mask_truncated)
        batch.update(group_rows(rewards))          # group_rewards [P*G, G, R], group_index [P*G]
        if self.ref_logps is not None:
            t0 = time.perf_counter()
            batch["logp_ref"] = self.ref_logps(batch)
            metrics["time/logp_ref_s"] = time.perf_counter() - t0
        # Shuffle rows so each minibatch mixes prompts (deterministic per rollout).
        order = np.random.default_rng([self.seed, index, 7]).permutation(len(batch["tokens"]))
        batch = {k: v[order] for k, v in batch.items()}
        metrics["rollout/seconds"] = time.perf_counter() - began
        return Produced(index, batch, metrics)

    def _score(self, groups: list[Group], seconds: dict[str, float]) -> None:
        """Raw rewards [G, R] of each finished group, every reward in one batched call (timed)."""
        def timed(name, fn):
            def run(prompts, samples):
                t0 = time.perf_counter()
                try:
                    return fn(prompts, samples)
                finally:
                    seconds[name] += time.perf_counter() - t0
            return run
        rewards = score_groups({k: timed(k, fn) for k, fn in self.rewards.items()}, [g.prompt for g in groups],
                               [rollout_samples(g, self.settings) for g in groups])        # [n, G, R]
        for group, r in zip(groups, rewards):
            group.rewards = r

    def _time_metrics(self, stats0, generated: int, gen_seconds: float, groups: list[Group], index: int,
                      reward_seconds: dict[str, float]) -> dict[str, float]:
        """Where the rollout's time went (metric 1 of docs/GRPO.md)."""
        stats = self.engine.stats
        row_steps = stats.decode_row_steps - stats0.decode_row_steps
        idle = row_steps - (stats.active_row_steps - stats0.active_row_steps)
        chips = self.engine.mesh.devices.size if self.engine.mesh is not None else 1
        tok_s = generated / max(gen_seconds, 1e-9)
        trajectories = [t for g in groups for t in g.samples]
        staleness = [index - min(t.first_version for t in g.samples) for g in groups]
        out = {"time/prefill_s": stats.prefill_seconds - stats0.prefill_seconds,
               "time/decode_s": stats.decode_seconds - stats0.decode_seconds,
               "rollout/tokens_per_sec": tok_s, "rollout/tokens_per_sec_per_chip": tok_s / chips,
               "rollout/slowest_sample_s": max(t.seconds for t in trajectories),
               "rollout/finished_row_share": idle / row_steps if row_steps else 0.0,
               "rollout/staleness_mean": float(np.mean(staleness)), "rollout/staleness_max": float(max(staleness))}
        out.update({f"time/reward/{name}_s": s for name, s in reward_seconds.items()})
        return out

    # --- what carries between rollouts, for exact resume ----------------------------------------------
    def get_state(self) -> dict:
        groups = self.parked + self.waiting
        flat = [t for g in groups for t in g.samples]
        arrays = {"ids": np.array([i for t in flat for i in t.ids], np.int32),
                  "logps": np.array([x for t in flat for x in t.logps], np.float32),
                  "lengths": np.array([len(t.ids) for t in flat], np.int64)}
        if any(g.rewards is not None for g in self.waiting):
            arrays["rewards"] = np.stack([g.rewards for g in self.waiting])
        samples = [{k: getattr(t, k) for k in ("finish", "stop_string", "eos", "text", "segments", "first_version",
                                               "seconds")} for t in flat]
        return {"next_position": self.next_position, "parked": [g.position for g in self.parked],
                "waiting": [g.position for g in self.waiting], "samples": samples, "arrays": pack_arrays(arrays)}

    def set_state(self, state: dict) -> None:
        self.next_position = int(state["next_position"])
        arrays = unpack_arrays(state["arrays"])
        ends = np.cumsum(arrays["lengths"])
        trajectories = []
        for i, meta in enumerate(state["samples"]):
            start = ends[i] - arrays["lengths"][i]
            trajectories.append(Trajectory(arrays["ids"][start:ends[i]].tolist(),
                                           arrays["logps"][start:ends[i]].tolist(), **meta))
        size = self.settings.group_size
        groups = []
        for k, position in enumerate(state["parked"] + state["waiting"]):
            group = self._new_group(position)
            group.samples = trajectories[k * size:(k + 1) * size]
            groups.append(group)
        self.parked, self.waiting = groups[:len(state["parked"])], groups[len(state["parked"]):]
        for k, group in enumerate(self.waiting):
            group.rewards = arrays["rewards"][k]
