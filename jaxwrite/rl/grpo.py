"""GRPO as an objective of the one trainer: the policy loss, and a batch source that rolls out.

Each rollout samples `group_size` answers for `prompts_per_step` prompts (rl/producer.py), scores every
reward (logged raw, with the guard-rail and step-time metrics) and yields `updates_per_rollout`
minibatches whose rows carry their group's rewards and the sampler's log-prob of each token; the update
step turns the rewards into group advantages inside its jit (`jaxwrite.rl.algo_core.row_advantages`), so
training runs the registry's estimator on device, and weighs off-policy tokens against the sampler
(`importance_weights`). Rollouts come synchronously or ahead of training under a staleness bound, on the
training mesh or a rollout mesh of their own (rl/pipeline.py; docs/GRPO.md). The trainer applies one
optimiser step per minibatch, so checkpoints, exact resume, SIGTERM handling, metrics and MFU are the
trainer's. The policy log-probs come from the fused log-prob kernel family
(`jaxwrite.kernels.token_logprobs`): the [tokens, vocab] logits never exist.

The objective is registered below; jaxwrite.train names this module for "grpo" and imports it on the
first lookup of that name, so no caller imports rl just to register it.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxwrite.common import InputError
from jaxwrite.infer import Engine, SamplingParams
from jaxwrite.kernels import token_logprobs
from jaxwrite.parallel import logical_sharding, make_mesh, state_shardings, use_mesh_rules
from jaxwrite.rl.algo_core import grpo_policy_loss, importance_weights, row_advantages, sampler_mismatch
from jaxwrite.rl.config import RLConfig
from jaxwrite.rl.grpo_setup import prepare_grpo
from jaxwrite.rl.length import word_budget
from jaxwrite.rl.length_task import length_control_prompts
from jaxwrite.rl.prompts import load_rl_prompts
from jaxwrite.rl.pipeline import RolloutPipeline
from jaxwrite.rl.producer import RolloutProducer
from jaxwrite.rl.rewards import make_reward, make_rm_reward
from jaxwrite.rl.rollout import RolloutSettings
from jaxwrite.rl.samples import RolloutSampleLog
from jaxwrite.rl.state_codec import pack_arrays, unpack_arrays
from jaxwrite.train import OBJECTIVES, BatchSource, Objective, RunContext, TrainConfig

log = logging.getLogger(__name__)

# What the progress bar shows of a GRPO step besides the loss and the update's time (metric 1).
PROGRESS = (("roll_tok_s", "rollout/tokens_per_sec"), ("wait_s", "time/rollout_wait_s"),
            ("tail", "rollout/finished_row_share"), ("trunc", "truncated_frac"))


@dataclasses.dataclass(frozen=True)
class LossSettings:
    """Static settings of the update step's advantages and policy loss (closed over by its jit)."""
    temperature: float = 0.8
    advantage: str = "longwriter_zero"            # a name in ADVANTAGE_ESTIMATORS
    reward_weights: tuple[float, ...] | None = None   # one per reward; None = equal weights
    eps_low: float = 0.2
    eps_high: float | None = None
    beta: float = 0.0
    aggregation: str = "token_mean"
    max_tokens: int | None = None
    kernel: str = "auto"
    is_correction: str = "none"                   # a name in IS_CORRECTIONS (rl.is_correction, auto resolved)
    is_cap: float = 2.0

    @classmethod
    def from_config(cls, rl: RLConfig) -> "LossSettings":
        """The loss's part of the (checked) `rl` settings."""
        return cls(temperature=rl.temperature, advantage=rl.advantage, reward_weights=rl.reward_weights or None,
                   eps_low=rl.eps_low, eps_high=rl.eps_high, beta=rl.beta, aggregation=rl.loss_aggregation,
                   max_tokens=rl.max_new_tokens, kernel=rl.kernel, is_correction=rl.importance_correction,
                   is_cap=rl.is_cap)


def policy_logprobs(model, batch, settings: LossSettings) -> tuple[jax.Array, jax.Array]:
    """Per-token log-probs and entropies [batch, seq] of `targets` under the tempered policy."""
    hidden = model(batch["tokens"], attention_mask=batch["attention_mask"], logits=False).hidden  # [B, T, D]
    b, t, d = hidden.shape
    # The head in the compute dtype, as the plain logits path uses it: a float32 master copy would make
    # every logit tile a float32 matmul (and the gathered head twice the size).
    dt = jnp.dtype(model.cfg.dtype)
    w = model.head_weight().astype(dt)                                                      # [D, V]
    # The entropy is a metric: no gradient from it, and the kernels' backward skips its term.
    logp, entropy = token_logprobs(hidden.reshape(b * t, d).astype(dt), w, batch["targets"].reshape(-1),
                                   temperature=settings.temperature, impl=settings.kernel, entropy_grad=False)
    return logp.reshape(b, t), entropy.reshape(b, t)


def grpo_loss_fn(model, batch, rng, extra: LossSettings):
    """Clipped surrogate over completion tokens, with each row's group advantage computed here from its
    group's rewards; metrics are scalars averaged by the trainer."""
    del rng
    logp, entropy = policy_logprobs(model, batch, extra)
    advantages = row_advantages(batch["group_rewards"], batch["group_index"], extra.advantage,
                                extra.reward_weights)                                  # [B]
    # One update per rollout: the sampling policy is the one being updated, so logp_old is this
    # pass's own log-probs held constant (ratio 1, the same gradient) and needs no separate pass.
    logp_old = batch["logp_old"] if "logp_old" in batch else jax.lax.stop_gradient(logp)
    weights, mismatch = None, {}
    if "logp_sampler" in batch:   # the engine's log-prob of each token, under the weights that sampled it
        mismatch = sampler_mismatch(jax.lax.stop_gradient(logp), batch["logp_sampler"], batch["loss_mask"])
        if extra.is_correction != "none":
            weights = importance_weights(logp_old, batch["logp_sampler"], batch["loss_mask"], extra.is_correction,
                                         extra.is_cap)                                    # [B, T]
    loss, metrics = grpo_policy_loss(
        logp, logp_old, advantages, batch["loss_mask"], sample_mask=batch["sample_mask"], token_weights=weights,
        logp_ref=batch.get("logp_ref"), eps_low=extra.eps_low, eps_high=extra.eps_high, beta=extra.beta,
        aggregation=extra.aggregation, max_tokens=extra.max_tokens)
    mask = batch["loss_mask"] * batch["sample_mask"][:, None]
    metrics = {k: v for k, v in {**metrics, **mismatch}.items() if jnp.ndim(v) == 0}
    metrics["entropy"] = jnp.sum(entropy * mask) / jnp.maximum(jnp.sum(mask), 1.0)
    metrics["loss"] = loss
    return loss, metrics


def _rl_prompts(rl: RLConfig, seed: int, tokenizer) -> list:
    # L_max per prompt from its language's words per token (measured on the policy tokenizer unless
    # rl.words_per_token overrides it): one figure would misjudge Chinese by a factor of two or more.
    max_len = word_budget(tokenizer, rl.max_new_tokens, rl.words_per_token, lang=rl.lang)
    log.info("length reward L_max: %s", max_len.describe())
    if rl.prompts == "length_control":
        task = rl.length_task
        return length_control_prompts(task.count, task.min_words, task.max_words, max_len, seed=seed,
                                      zh_fraction=task.zh_fraction, style=task.style)
    return load_rl_prompts(rl.prompts, max_len=max_len, default_range=rl.default_range or None).prompts


def rollout_devices(config: TrainConfig) -> tuple[list, list]:
    """(training devices, rollout devices): the rollout mesh (rl.rollout_mesh) takes the last devices."""
    devices = jax.devices()
    n = math.prod(config.rl.rollout_mesh) if config.rl.rollout_mesh else 0
    if n and n >= len(devices):
        raise InputError(f"a rollout mesh of {n} devices leaves none of the {len(devices)} for training",
                         field="rl.rollout_mesh")
    return devices[:len(devices) - n], devices[len(devices) - n:]


class RolloutStream:
    """Infinite iterator of GRPO minibatches with exact-resume state (see module docstring)."""

    def __init__(self, config: TrainConfig, tokenizer, model, mesh, rules, workdir: str = ""):
        rl = self.rl = config.rl
        self.seed, self.model, self.mesh, self.rules = config.seed, model, mesh, rules
        sampling = SamplingParams(temperature=rl.temperature, top_p=rl.top_p, max_new_tokens=rl.max_new_tokens,
                                  n=rl.group_size)
        self.settings = RolloutSettings(sampling, template=rl.template, lang=rl.lang)
        self.loss_settings = LossSettings.from_config(rl)
        self.prompts = _rl_prompts(rl, config.seed, tokenizer)
        self.per_step = rl.prompts_per_step
        if self.per_step > len(self.prompts):
            raise InputError(f"{self.per_step} prompts per step but only {len(self.prompts)} prompts",
                             field="rl.prompts_per_step")
        self.updates = rl.updates_per_rollout
        rows = self.per_step * self.settings.group_size
        if rows % self.updates:
            raise InputError(f"{rows} samples per rollout do not split into {self.updates} minibatches",
                             field="rl.updates_per_rollout")
        # The engine decodes on the training mesh, or on a rollout mesh of its own (rl.rollout_mesh).
        own = rollout_devices(config)[1]
        self.rollout_mesh = make_mesh(tuple(rl.rollout_mesh), own) if own else mesh
        self.engine = Engine(model, tokenizer, mesh=self.rollout_mesh, max_batch=rl.engine_max_batch,
                             chunk_steps=rl.engine_chunk_steps)
        self.rewards = {name: self._make_reward(name) for name in rl.rewards}
        self.served, self._current, self._metrics = 0, None, []
        self.pad_id = tokenizer.pad_id
        graphdef = nnx.graphdef(model)

        @jax.jit
        def logps(state, batch):
            return policy_logprobs(nnx.merge(graphdef, state), batch, self.loss_settings)[0]

        self._logps = logps
        # A frozen copy of the initial policy, only when the KL term is on (beta > 0), where rollouts run.
        ref = None
        if self.loss_settings.beta > 0:
            ref = self._weights_for_engine()[0]
        # Readable samples (rl/samples.py), written by the first process only.
        samples = (RolloutSampleLog(workdir, rl.samples_every, rl.samples_prompts)
                   if workdir and jax.process_index() == 0 else None)
        self.producer = RolloutProducer(
            rl, config.seed, self.prompts, self.engine, self.settings, self.rewards, self.pad_id, samples,
            ref_logps=(lambda batch: self._token_logps(ref, batch, self.rollout_mesh)) if ref is not None else None)
        last = (config.num_steps - 1) // self.updates
        self.pipeline = RolloutPipeline(self.producer, rl.max_staleness, self._weights_for_engine,
                                        self._refresh_engine, last)

    def _make_reward(self, name: str):
        if name != "writing_rm":
            return make_reward(name)
        from jaxwrite.rl.rm_scorer import RewardModelScorer
        if not self.rl.rm_path:
            raise InputError("the writing_rm reward needs a trained reward model", field="rl.rm_path")
        # rm_max_len 0: the RM's own context; longer answers are scored whole, in chunks. It scores where
        # the rollouts run (with a rollout mesh, off the training devices).
        return make_rm_reward(RewardModelScorer(self.rl.rm_path, self.rollout_mesh, max_len=self.rl.rm_max_len))

    # --- the engine's weights -----------------------------------------------------------------------
    def _weights_for_engine(self):
        """A copy of the model's current weights that owns its buffers, placed for the engine: an on-device
        copy on a shared mesh, a device-to-device transfer to a rollout mesh. Returns (weights, seconds)."""
        began = time.perf_counter()
        state = nnx.state(self.model)
        if self.rollout_mesh is self.mesh:
            weights = jax.tree.map(jnp.copy, state)
        else:
            weights = jax.device_put(state, state_shardings(state, self.rollout_mesh, self.rules))
        jax.block_until_ready(weights)
        return weights, time.perf_counter() - began

    def _refresh_engine(self, weights) -> float:
        began = time.perf_counter()
        self.engine.refresh_params(weights)
        return time.perf_counter() - began

    # --- iterator protocol with checkpointable state ------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        index = self.served % self.updates
        if index == 0:
            self._current = self._next_rollout(self.served // self.updates)
        rows = next(iter(self._current.values())).shape[0] // self.updates
        self.served += 1
        return {k: v[index * rows:(index + 1) * rows] for k, v in self._current.items()}

    def _next_rollout(self, rollout_index: int) -> dict[str, np.ndarray]:
        produced = self.pipeline.get(rollout_index)
        batch, metrics = dict(produced.batch), dict(produced.metrics)
        if self.updates > 1:   # later minibatches see a moved policy: keep the rollout's starting log-probs
            began = time.perf_counter()
            batch["logp_old"] = self._token_logps(nnx.state(self.model), batch, self.mesh)
            metrics["time/logp_old_s"] = time.perf_counter() - began
        self._metrics.append(metrics)
        return batch

    def get_state(self) -> dict:
        state = {"served": self.served, "pipeline": self.pipeline.get_state()}
        if self.served % self.updates:   # mid-rollout: keep the rollout so the resumed run sees the same data
            state["rollout"] = pack_arrays(self._current)
        return state

    def set_state(self, state: dict) -> None:
        self.served = int(state["served"])
        if "rollout" in state:
            self._current = unpack_arrays(state["rollout"])
        if "pipeline" in state:
            self.pipeline.set_state(state["pipeline"])
        else:   # a checkpoint of the synchronous loop before rollouts were pipelined: P prompts per rollout
            produced = -(-self.served // self.updates)
            self.producer.next_position = produced * self.per_step
            self.pipeline.set_state({"launched": produced, "producer": self.producer.get_state(), "rollouts": []})

    def drain_metrics(self) -> list[dict[str, float]]:
        out, self._metrics = self._metrics, []
        return out

    def _token_logps(self, state, batch: dict[str, np.ndarray], mesh) -> np.ndarray:
        keys = ("tokens", "targets", "attention_mask")
        with use_mesh_rules(mesh, self.rules):
            placed = {k: jax.device_put(batch[k], logical_sharding(("batch", None), batch[k].shape, mesh,
                                                                    self.rules)) for k in keys}
            return np.asarray(self._logps(state, placed), np.float32)          # [rows, T]


# --- registration with the one trainer ----------------------------------------------------------------
def rollout_source(run: RunContext) -> BatchSource:
    """Rollouts of the model being trained, as the trainer's batch source."""
    stream = RolloutStream(run.config, run.tokenizer, run.model, run.mesh, run.rules, run.workdir)
    info = {"prompts": len(stream.prompts), "prompts_per_step": stream.per_step,
            "group_size": stream.settings.group_size, "rewards": list(stream.rewards),
            "advantage": run.config.rl.advantage, "updates_per_rollout": stream.updates,
            "max_staleness": run.config.rl.max_staleness, "importance_correction": stream.loss_settings.is_correction,
            "partial_rollout_tokens": run.config.rl.partial_rollout_tokens,
            "dynamic_sampling": run.config.rl.dynamic_sampling, "reward_columns": list(stream.producer.rewards),
            "length_reward_max_len_words": stream.prompts[0].max_len if stream.prompts else None}
    return BatchSource(train=stream, make_eval=None, info=info, drain_metrics=stream.drain_metrics,
                       progress=PROGRESS, close=stream.pipeline.close)


OBJECTIVES.register("grpo")(Objective("transformer", grpo_loss_fn, rollout_source,
                                      init_extra=lambda config, model: LossSettings.from_config(config.rl),
                                      prepare=prepare_grpo, rl_section=RLConfig,
                                      train_devices=lambda config: rollout_devices(config)[0]))
