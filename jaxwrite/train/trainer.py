"""The one training loop: every objective, exact resume, SIGTERM checkpoints, NaN guard, metrics.

The loop itself only steps; logging, throughput and MFU, source metrics (GRPO rollouts), evaluation and
checkpointing are hooks (jaxwrite.train.hooks), and callers add their own with `Trainer.add_hook`.

Resume is exact: a checkpoint after step s holds the parameters, the optimiser state (incl. its step
counter, which drives the LR schedule), the RNG key for step s+1 and the data iterator's state after
batch s. Re-running the same command continues from there and logs the same losses as a run that was
never interrupted.
"""
from __future__ import annotations

import functools
import json
import math
import os
import signal
import sys
import time
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from tqdm import tqdm

from jaxwrite.checkpoint import Checkpointer, copy_tokenizer, write_model_config
from jaxwrite.common import InputError
from jaxwrite.common.remote import MirroredDir, is_remote
from jaxwrite.parallel import DEFAULT_RULES, make_mesh
from jaxwrite.train.config import TrainConfig
from jaxwrite.train.hooks import Hook, IntervalMetrics, StepInfo, mean_metrics, source_metrics
from jaxwrite.train.metrics_log import MetricsLog
from jaxwrite.train.objectives import OBJECTIVES, RunContext
from jaxwrite.train.optim import make_optimizer
from jaxwrite.train.setup import create_model_and_optimizer, lora_spec
from jaxwrite.train.step import StepFunctions
from jaxwrite.train.throughput import total_peak_flops
from jaxwrite.train.tokenizer_setup import resolve_data_dir, run_data_needs, setup_tokenizer
from jaxwrite.train.tracking import ProfileWindow, logging_settings, make_trackers
from jaxwrite.train.validate import validate_config


class TrainingDiverged(FloatingPointError):
    """A non-finite loss or gradient: the run stops and keeps its last good checkpoint."""


class _Preemption:
    """SIGTERM sets a flag; the loop saves at the next step boundary and exits cleanly."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self._previous)


def _processed_tokens(batch: dict[str, np.ndarray]) -> tuple[int, int]:
    """(positions the model ran on in this host batch, their sequence length)."""
    arrays = [v for k, v in batch.items() if k.endswith("tokens")]
    return sum(a.size for a in arrays), arrays[0].shape[-1]


@jax.jit
def _all_finite(state) -> jax.Array:
    leaves = [jnp.isfinite(x).all() for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.floating)]
    return jnp.stack(leaves).all()


def train(config: TrainConfig | ml_collections.ConfigDict, workdir: str,
          hooks: Sequence[tuple[Callable[[StepInfo], None], int]] = ()) -> int:
    """Runs (or resumes) the recipe in `config` inside `workdir`. Returns the process exit status.

    `config` is the run's TrainConfig, or a recipe's ConfigDict (jaxwrite.common.load_config), which is
    checked and typed here before anything else. The objective's `prepare` runs first (GRPO: trains the
    policy and reward model it starts from). `hooks` are (fn, every) pairs added after the trainer's own.
    SIGTERM at any point after this call starts (setup included) saves at the next step boundary.
    """
    config = TrainConfig.from_recipe(config)
    needs = run_data_needs(config)
    if needs:   # one root for every reader of this run (and the runs GRPO trains first)
        config = config.replace(data_dir=resolve_data_dir(config, *needs))
    with _Preemption() as preemption:
        objective = OBJECTIVES.get(config.objective)
        # A missing wandb fails before anything trains.
        logging_settings(config.logging)
        if objective.prepare:
            config = objective.prepare(config, workdir)
        trainer = Trainer(config, workdir, preemption)
        for fn, every in hooks:
            trainer.add_hook(fn, every=every)
        return trainer.run()


class Trainer:
    """One run of one objective: built from the recipe, restored from its latest checkpoint if there is
    one, then stepped to num_steps with the hooks run after each step."""

    def __init__(self, config: TrainConfig, workdir: str, preemption: _Preemption | None = None):
        self.config = config
        # A bucket workdir (gs://...): checkpoints go there through Orbax; everything else is written in a
        # local staging folder and pushed as it changes (jaxwrite.common.remote), pulled back on resume.
        self.mirror = MirroredDir(os.fspath(workdir)) if is_remote(workdir) else None
        if self.mirror and jax.process_index() == 0:
            self.mirror.pull()
        self.workdir = self.mirror.local if self.mirror else os.path.abspath(workdir)
        self.preemption = preemption or _Preemption()   # one that is never entered never fires
        os.makedirs(self.workdir, exist_ok=True)
        self.objective = objective = OBJECTIVES.get(config.objective)
        tokenizer, tokenizer_path = setup_tokenizer(config, self.workdir)
        # The objective may keep devices for itself (GRPO's rollout mesh); the training mesh takes the rest.
        devices = objective.train_devices(config) if objective.train_devices else jax.devices()
        self.model_config = validate_config(config, len(devices), tokenizer.vocab_size)
        mesh, rules = make_mesh(tuple(config.mesh), devices), DEFAULT_RULES
        self.num_steps = config.num_steps
        tx, self.schedule = make_optimizer(config.optimizer, self.num_steps)
        # The model config and tokenizer copy sit beside the step folders (a local run: the same folder).
        self.meta_dir = os.path.join(self.workdir, "checkpoints")
        self.ckpt_dir = f"{self.mirror.remote}/checkpoints" if self.mirror else self.meta_dir
        self.ckpt = Checkpointer(self.ckpt_dir, keep=config.keep_checkpoints)
        resuming = self.ckpt.latest_step() is not None
        # A resumed run restores its own weights; loading init_from first would only cost time.
        self.lora = lora_spec(config.model)
        self.model, self.optimizer = create_model_and_optimizer(
            objective.model_class, self.model_config, tx, config.seed, mesh, rules,
            "" if resuming else config.model.init_from, self.lora)
        self.source = objective.batch_source(RunContext(config, tokenizer, self.model, mesh, rules,
                                                                     self.workdir))
        if jax.process_index() == 0:
            self._write_run_files(tokenizer_path)
        self.rng, self.start = jax.random.key(config.seed), 0
        if resuming:
            restored = self.ckpt.restore(self.model, self.optimizer, mesh=mesh, rules=rules)
            self.start, self.rng = restored.step, restored.rng
            self.source.train.set_state(restored.data_state)
            print(f"resumed from step {self.start} ({self.ckpt_dir})", file=sys.stderr, flush=True)
        extra = objective.init_extra(config, self.model) if objective.init_extra else None
        self.steps = StepFunctions(self.model, self.optimizer, objective.loss_fn, mesh, rules,
                                   config.grad_accum_steps, extra)
        self.state = nnx.split((self.model, self.optimizer))[1]
        self.log = (MetricsLog(self.workdir, self.start, make_trackers(config, self.workdir, self.start))
                    if jax.process_index() == 0 else None)
        window = config.profile_window
        self._profile = ProfileWindow(*window, os.path.join(self.workdir, "tensorboard")) if window else None
        self.last_saved = self.ckpt.latest_step()
        self._bar = None
        self._hooks: list[Hook] = []
        self._add_standard_hooks()

    def add_hook(self, fn: Callable[[StepInfo], None], every: int = 1, at_start: bool = False) -> None:
        """Runs fn(info) after every `every`-th step and after the last one (at_start: also at step 0 of
        a run that is not resumed), after the hooks added before it."""
        self._hooks.append(Hook(fn, int(every), at_start))

    def _add_standard_hooks(self) -> None:
        config, log_every = self.config, self.config.log_every
        peak = total_peak_flops(per_device_override=config.peak_flops_per_device)
        interval = IntervalMetrics(functools.partial(self.objective.flops_per_token, self.model_config), peak,
                                   self.schedule)
        self.add_hook(interval.observe)
        self.add_hook(interval.report, every=log_every)
        if self.source.drain_metrics:
            self.add_hook(source_metrics(self.source.drain_metrics), every=log_every)
        self.add_hook(self._write_record, every=log_every)
        if self.mirror and jax.process_index() == 0:
            self.add_hook(lambda info: self.mirror.push(), every=log_every)
        self.add_hook(lambda info: self._bar.update(1))
        if self.source.make_eval and config.eval_every:
            # At step 0 too: the starting point, so a run shows how far it moved held-out metrics.
            self.add_hook(self.evaluate, every=config.eval_every, at_start=True)
        self.add_hook(lambda info: self.save(info.step), every=config.checkpoint_every)
        if self._profile:
            self.add_hook(self._profile, at_start=True)

    def run(self) -> int:
        """Steps from the restored step to num_steps; returns 0, also when it stops for a SIGTERM."""
        try:
            if self.start == 0:
                self._run_hooks(StepInfo(0, {}), at_start=True)
            self._bar = tqdm(total=self.num_steps, initial=self.start, desc=self.config.objective,
                             dynamic_ncols=True, disable=not self.config.progress_bar or jax.process_index() != 0)
            for step in range(self.start + 1, self.num_steps + 1):
                self._run_hooks(self._step(step))
                if self.preemption.requested:
                    self.save(step)
                    self.ckpt.wait()
                    print(f"SIGTERM: saved step {step} to {self.ckpt_dir}; exiting", file=sys.stderr)
                    return 0
        finally:
            if self.source.close:
                self.source.close()
            if self._profile:
                self._profile.stop()   # a window cut short by SIGTERM or an error still writes its trace
            if self._bar is not None:
                self._bar.close()
            self.ckpt.close()   # makes the last async save durable before the process exits
            if self.log:
                self.log.close()
            if self.mirror and jax.process_index() == 0:
                self.mirror.push()   # the last metrics, events and samples reach the bucket
        return 0

    def _run_hooks(self, info: StepInfo, at_start: bool = False) -> None:
        for hook in self._hooks:
            if hook.at_start if at_start else hook.due(info.step, self.num_steps):
                hook.fn(info)

    def _step(self, step: int) -> StepInfo:
        waited = time.perf_counter()
        batch = next(self.source.train, None)
        waited = time.perf_counter() - waited
        if batch is None:
            raise InputError(f"the training data ran out before step {step}", field="data")
        self.rng, step_rng = jax.random.split(self.rng)
        began = time.perf_counter()
        self.state, metrics = self.steps.train(self.state, batch, step_rng)
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        seconds = time.perf_counter() - began
        nnx.update((self.model, self.optimizer), self.state)
        if not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])):
            raise TrainingDiverged(f"step {step}: loss is {metrics['loss']} (grad_norm {metrics['grad_norm']}); "
                                   f"stopping. Last good checkpoint: step {self.last_saved} in {self.ckpt_dir}")
        tokens, seq_len = _processed_tokens(batch)
        return StepInfo(step, metrics, tokens * jax.process_count(), seq_len, seconds, waited)

    # --- what the standard hooks do ---------------------------------------------------------------------
    def save(self, step: int) -> None:
        """Checkpoints step `step` (once: a SIGTERM at a checkpoint step does not save it twice)."""
        if self.last_saved == step:
            return
        if not bool(_all_finite(self.state)):
            raise TrainingDiverged(f"step {step}: parameters or optimiser state are not finite; not saving. "
                                   f"Last good checkpoint: step {self.last_saved} in {self.ckpt_dir}")
        self.ckpt.save(step, self.model, self.optimizer, self.rng, self.source.train.get_state(),
                       extra={"objective": self.config.objective})
        self.last_saved = step

    def evaluate(self, info: StepInfo) -> None:
        """Mean eval metrics over the source's eval batches, logged as eval/* at this step."""
        eval_rng = jax.random.fold_in(jax.random.key(self.config.seed), info.step)
        results = [jax.device_get(self.steps.evaluate(self.state, b, eval_rng)) for b in self.source.make_eval()]
        if self.log and results:
            self.log.write(info.step, {f"eval/{k}": v for k, v in mean_metrics(results).items()})

    def _write_record(self, info: StepInfo) -> None:
        if self.log:
            self.log.write(info.step, info.record)
        shown = {"loss": f"{info.record['loss']:.4f}", "tok_s": f"{info.record['tokens_per_sec']:,.0f}",
                 "data_s": f"{info.record['time/data_s']:.2f}", "upd_s": f"{info.record['time/update_s']:.2f}"}
        shown.update({label: f"{info.record[key]:,.3g}" for label, key in self.source.progress if key in info.record})
        self._bar.set_postfix(shown)

    def _write_run_files(self, tokenizer_path: str) -> None:
        # What the data source kept, dropped, split or re-weighted: never a silent change of the data.
        with open(os.path.join(self.workdir, "data_info.json"), "w", encoding="utf-8") as f:
            json.dump(self.source.info, f, indent=2, ensure_ascii=False, default=str)
        with open(os.path.join(self.workdir, "run_config.json"), "w", encoding="utf-8") as f:
            json.dump(self.config.to_dict(), f, indent=2)
        write_model_config(self.meta_dir, self.model_config, self.objective.model_class, self.lora)
        copy_tokenizer(tokenizer_path, self.meta_dir)
