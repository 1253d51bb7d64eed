"""One process of the multi-host smoke run (launched by tests/test_platform_multihost.py).

Joins the run from JAXWRITE_* environment variables (none: a single process), builds one global
mesh over every device of every process, trains the tiny Transformer for a few sharded steps on a
global batch fed per process, saves an Orbax checkpoint, trains on, restores the checkpoint, repeats
the last steps, and (process 0) writes every loss to OUT/losses.json.

    python tests/platform_multihost_worker.py OUT_DIR
"""
from __future__ import annotations

import json
import os
import sys

import jax
import numpy as np
import optax
from flax import nnx

from jaxwrite.checkpoint import Checkpointer
from jaxwrite.models import get_preset
from jaxwrite.parallel import DEFAULT_RULES, make_mesh
from jaxwrite.parallel.distributed import initialize_distributed, process_local_rows, shutdown_distributed
from jaxwrite.train.objectives import masked_next_token_loss
from jaxwrite.train.setup import create_model_and_optimizer
from jaxwrite.train.step import StepFunctions

GLOBAL_ROWS, SEQ = 8, 16
STEPS_BEFORE_SAVE, STEPS_AFTER_SAVE = 3, 2


def global_batch(step: int, vocab: int) -> dict[str, np.ndarray]:
    """The whole step's batch, identical on every process; each feeds only its own rows."""
    rng = np.random.default_rng(1000 + step)
    tokens = rng.integers(0, vocab, size=(GLOBAL_ROWS, SEQ + 1), dtype=np.int32)     # [rows, seq + 1]
    positions = np.broadcast_to(np.arange(SEQ, dtype=np.int32), (GLOBAL_ROWS, SEQ))   # [rows, seq]
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:],
            "loss_mask": np.ones((GLOBAL_ROWS, SEQ), np.int32),
            "segment_ids": np.ones((GLOBAL_ROWS, SEQ), np.int32), "positions": np.array(positions)}


def scalar(x: jax.Array) -> float:
    # Replicated over every device of every process: read this process's own copy.
    return float(np.asarray(x.addressable_data(0)))


def main(out_dir: str) -> int:
    settings = initialize_distributed(None)
    mesh = make_mesh((1, -1, 1))                      # fsdp over all 8 devices of all processes
    cfg = get_preset("tiny")
    model, optimizer = create_model_and_optimizer("transformer", cfg, optax.adamw(1e-3), 0, mesh, DEFAULT_RULES)
    steps = StepFunctions(model, optimizer, masked_next_token_loss, mesh, DEFAULT_RULES)
    rows = process_local_rows(GLOBAL_ROWS)
    rng = jax.random.key(0)

    def run(state, first: int, count: int) -> tuple:
        losses = []
        for step in range(first, first + count):
            batch = {k: v[rows] for k, v in global_batch(step, cfg.vocab_size).items()}
            state, metrics = steps.train(state, batch, jax.random.fold_in(rng, step))
            losses.append(scalar(metrics["loss"]))
        return state, losses

    state = nnx.split((model, optimizer))[1]
    state, before = run(state, 1, STEPS_BEFORE_SAVE)
    nnx.update((model, optimizer), state)
    ckpt = Checkpointer(os.path.join(out_dir, "ckpt"))
    ckpt.save(STEPS_BEFORE_SAVE, model, optimizer, rng)
    ckpt.wait()
    state, after = run(state, STEPS_BEFORE_SAVE + 1, STEPS_AFTER_SAVE)
    nnx.update((model, optimizer), state)

    restored = ckpt.restore(model, optimizer, mesh=mesh)
    ckpt.close()
    state = nnx.split((model, optimizer))[1]
    state, resumed = run(state, restored.step + 1, STEPS_AFTER_SAVE)

    if jax.process_index() == 0:
        record = {"mode": settings.mode, "processes": jax.process_count(), "devices": jax.device_count(),
                  "local_devices": jax.local_device_count(), "before_save": before, "after_save": after,
                  "after_restore": resumed, "restored_step": restored.step}
        with open(os.path.join(out_dir, "losses.json"), "w") as f:
            json.dump(record, f)
    shutdown_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
