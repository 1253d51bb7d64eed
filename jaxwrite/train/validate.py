"""Checks a recipe before any data is read or device memory is touched (also used by config tests)."""
from __future__ import annotations

import ml_collections

from jaxwrite.common import InputError
from jaxwrite.models import ModelConfig
from jaxwrite.parallel import resolve_mesh_shape
from jaxwrite.train.objectives import OBJECTIVES
from jaxwrite.train.setup import model_config


def validate_config(config: ml_collections.ConfigDict, num_devices: int, tokenizer_vocab: int) -> ModelConfig:
    """Raises a one-line InputError for an inconsistent recipe; returns the model config it builds."""
    OBJECTIVES.get(config.objective)   # a one-line error listing the known objectives
    for key in ("num_steps", "log_every", "checkpoint_every", "grad_accum_steps", "keep_checkpoints"):
        if int(config[key]) < 1:
            raise InputError(f"expected a positive integer, got {config[key]}", field=key)
    try:
        data, fsdp, _ = resolve_mesh_shape(tuple(config.mesh), num_devices)
    except ValueError as err:
        raise InputError(str(err), field="mesh") from None
    if "data" not in config:   # GRPO: batches come from rollouts, checked by the rollout source
        return model_config(config.model, tokenizer_vocab)
    batch, accum = int(config.data.batch_size), int(config.grad_accum_steps)
    if batch % accum:
        raise InputError(f"batch_size {batch} is not divisible by grad_accum_steps {accum}",
                         field="data.batch_size")
    if (batch // accum) % (data * fsdp):
        raise InputError(f"microbatch of {batch // accum} rows does not split over data×fsdp = {data * fsdp} "
                         "devices", field="data.batch_size")
    cfg = model_config(config.model, tokenizer_vocab)
    if int(config.data.seq_len) > cfg.max_seq_len:
        raise InputError(f"seq_len {config.data.seq_len} exceeds the model's max_seq_len {cfg.max_seq_len}",
                         field="data.seq_len")
    return cfg
