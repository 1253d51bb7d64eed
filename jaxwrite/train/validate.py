"""Checks a recipe against the devices and the tokenizer before any data is read or device memory is
touched (also used by config tests); each field alone was checked when the recipe was loaded."""
from __future__ import annotations

import ml_collections

from jaxwrite.common import InputError
from jaxwrite.models import ModelConfig
from jaxwrite.parallel import resolve_mesh_shape
from jaxwrite.train.config import TrainConfig
from jaxwrite.train.setup import model_config


def validate_config(config: TrainConfig | ml_collections.ConfigDict, num_devices: int,
                    tokenizer_vocab: int) -> ModelConfig:
    """Raises a one-line InputError for an inconsistent recipe; returns the model config it builds."""
    config = TrainConfig.from_recipe(config)
    try:
        data, fsdp, _ = resolve_mesh_shape(tuple(config.mesh), num_devices)
    except ValueError as err:
        raise InputError(str(err), field="mesh") from None
    if config.data is None:   # GRPO: batches come from rollouts, checked by the rollout source
        return model_config(config.model, tokenizer_vocab)
    batch, accum = config.data.batch_size, config.grad_accum_steps
    if batch % accum:
        raise InputError(f"batch_size {batch} is not divisible by grad_accum_steps {accum}",
                         field="data.batch_size")
    if (batch // accum) % (data * fsdp):
        raise InputError(f"microbatch of {batch // accum} rows does not split over data×fsdp = {data * fsdp} "
                         "devices", field="data.batch_size")
    cfg = model_config(config.model, tokenizer_vocab)
    if config.data.seq_len > cfg.max_seq_len:
        raise InputError(f"seq_len {config.data.seq_len} exceeds the model's max_seq_len {cfg.max_seq_len}",
                         field="data.seq_len")
    return cfg
