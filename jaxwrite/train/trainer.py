"""The one training loop: every objective, exact resume, SIGTERM checkpoints, NaN guard, metrics.

Resume is exact: a checkpoint after step s holds the parameters, the optimiser state (incl. its step
counter, which drives the LR schedule), the RNG key for step s+1 and the data iterator's state after
batch s. Re-running the same command continues from there and logs the same losses as a run that was
never interrupted.
"""
from __future__ import annotations

import json
import math
import os
import signal
import sys
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from tqdm import tqdm

from jaxwrite.checkpoint import Checkpointer, copy_tokenizer, write_model_config
from jaxwrite.common import InputError
from jaxwrite.parallel import DEFAULT_RULES, make_mesh
from jaxwrite.train.batches import BATCH_SOURCES
from jaxwrite.train.metrics_log import MetricsLog
from jaxwrite.train.objectives import OBJECTIVES
from jaxwrite.train.optim import make_optimizer
from jaxwrite.train.setup import create_model_and_optimizer
from jaxwrite.train.step import StepFunctions
from jaxwrite.train.throughput import mfu, total_peak_flops
from jaxwrite.train.tokenizer_setup import setup_tokenizer
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


def _mean_metrics(batches: list[dict]) -> dict[str, float]:
    return {k: float(np.mean([b[k] for b in batches])) for k in batches[0]} if batches else {}


def train(config: ml_collections.ConfigDict, workdir: str) -> int:
    """Runs (or resumes) the recipe in `config` inside `workdir`. Returns the process exit status.

    SIGTERM at any point after this call starts (setup included) saves at the next step boundary.
    """
    with _Preemption() as preemption:
        return _run(config, workdir, preemption)


def _run(config: ml_collections.ConfigDict, workdir: str, preemption: _Preemption) -> int:
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    objective = OBJECTIVES.get(config.objective)
    tokenizer, tokenizer_path = setup_tokenizer(config, workdir)
    cfg = validate_config(config, jax.device_count(), tokenizer.vocab_size)
    mesh = make_mesh(tuple(config.mesh))
    rules = DEFAULT_RULES
    num_steps = int(config.num_steps)
    tx, schedule = make_optimizer(config.optimizer, num_steps)
    ckpt_dir = os.path.join(workdir, "checkpoints")
    ckpt = Checkpointer(ckpt_dir, keep=int(config.keep_checkpoints))
    resuming = ckpt.latest_step() is not None
    # A resumed run restores its own weights; loading init_from first would only cost time.
    model, optimizer = create_model_and_optimizer(objective.model_class, cfg, tx, int(config.seed), mesh, rules,
                                                  "" if resuming else config.model.init_from)
    make_source = BATCH_SOURCES.get(objective.batch_source)
    source = (make_source(config, tokenizer, model=model, mesh=mesh, rules=rules) if objective.source_uses_model
              else make_source(config, tokenizer))
    if jax.process_index() == 0:
        # What the data source kept, dropped, split or re-weighted: never a silent change of the data.
        with open(os.path.join(workdir, "data_info.json"), "w", encoding="utf-8") as f:
            json.dump(source.info, f, indent=2, ensure_ascii=False, default=str)
        with open(os.path.join(workdir, "run_config.json"), "w", encoding="utf-8") as f:
            f.write(config.to_json(indent=2))
        write_model_config(ckpt_dir, cfg, objective.model_class)
        copy_tokenizer(tokenizer_path, ckpt_dir)
    rng, start = jax.random.key(int(config.seed)), 0
    if resuming:
        restored = ckpt.restore(model, optimizer, mesh=mesh, rules=rules)
        start, rng = restored.step, restored.rng
        source.train.set_state(restored.data_state)
        print(f"resumed from step {start} ({ckpt_dir})", file=sys.stderr, flush=True)

    extra = objective.init_extra(config, model) if objective.init_extra else None
    steps = StepFunctions(model, optimizer, objective.loss_fn, mesh, rules, int(config.grad_accum_steps), extra)
    state = nnx.split((model, optimizer))[1]
    log = MetricsLog(workdir, start) if jax.process_index() == 0 else None
    peak = total_peak_flops(per_device_override=float(config.peak_flops_per_device))
    reward_head = objective.model_class == "reward_model"
    last_saved = ckpt.latest_step()

    def save(step: int) -> None:
        nonlocal last_saved
        if not bool(_all_finite(state)):
            raise TrainingDiverged(f"step {step}: parameters or optimiser state are not finite; not saving. "
                                   f"Last good checkpoint: step {last_saved} in {ckpt_dir}")
        ckpt.save(step, model, optimizer, rng, source.train.get_state(),
                  extra={"objective": config.objective})
        last_saved = step

    eval_every = int(config.eval_every) if source.make_eval else 0

    def evaluate(step: int) -> None:
        eval_rng = jax.random.fold_in(jax.random.key(int(config.seed)), step)
        results = [jax.device_get(steps.evaluate(state, b, eval_rng)) for b in source.make_eval()]
        if log and results:
            log.write(step, {f"eval/{k}": v for k, v in _mean_metrics(results).items()})

    if start == 0 and eval_every:
        evaluate(0)   # the starting point, so a run shows how far it moved held-out metrics
    bar = tqdm(total=num_steps, initial=start, desc=config.objective, dynamic_ncols=True,
               disable=not config.progress_bar or jax.process_index() != 0)
    interval_time, interval_tokens, interval_metrics = 0.0, 0, []
    first_step_of_process = True
    try:
        for step in range(start + 1, num_steps + 1):
            batch = next(source.train, None)
            if batch is None:
                raise InputError(f"the training data ran out before step {step}", field="data")
            rng, step_rng = jax.random.split(rng)
            began = time.perf_counter()
            state, metrics = steps.train(state, batch, step_rng)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            elapsed = time.perf_counter() - began
            nnx.update((model, optimizer), state)
            if not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])):
                raise TrainingDiverged(
                    f"step {step}: loss is {metrics['loss']} (grad_norm {metrics['grad_norm']}); stopping. "
                    f"Last good checkpoint: step {last_saved} in {ckpt_dir}")
            tokens, seq_len = _processed_tokens(batch)
            tokens *= jax.process_count()
            if not first_step_of_process:
                # The first step of a process includes compilation; leave it out of throughput.
                interval_time += elapsed
                interval_tokens += tokens
            first_step_of_process = False
            interval_metrics.append(metrics)
            if step % int(config.log_every) == 0 or step == num_steps:
                if interval_time == 0:   # only the compiling step in this interval: report it as is
                    interval_time, interval_tokens = elapsed, tokens
                tok_s = interval_tokens / interval_time
                flops = cfg.flops_per_token(seq_len)
                if reward_head:
                    flops -= 3 * 2 * cfg.vocab_size * cfg.d_model   # no LM head on a reward model
                record = {**_mean_metrics(interval_metrics), "lr": float(schedule(step - 1)),
                          "tokens_per_sec": tok_s, "mfu": mfu(flops, tok_s, peak)}
                if source.drain_metrics:
                    record.update(_mean_metrics(source.drain_metrics()))
                if log:
                    log.write(step, record)
                bar.set_postfix(loss=f"{record['loss']:.4f}", tok_s=f"{tok_s:,.0f}")
                interval_time, interval_tokens, interval_metrics = 0.0, 0, []
            bar.update(1)
            if eval_every and (step % eval_every == 0 or step == num_steps):
                evaluate(step)
            if step % int(config.checkpoint_every) == 0 or step == num_steps or preemption.requested:
                save(step)
            if preemption.requested:
                ckpt.wait()
                print(f"SIGTERM: saved step {step} to {ckpt_dir}; exiting", file=sys.stderr)
                return 0
    finally:
        bar.close()
        ckpt.close()   # makes the last async save durable before the process exits
        if log:
            log.close()
    return 0
