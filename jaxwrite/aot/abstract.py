"""A recipe's model, optimiser and batches as shapes only: what `jaxwrite train` would build, with no
weights and no host memory for them.

The model and optimiser come from `nnx.eval_shape` over the same constructors the trainer calls
(jaxwrite.train.setup), so their shardings are the trainer's (logical axes -> mesh by the same rules).
Batches are ShapeDtypeStructs with the global shapes each objective's batch source yields.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxwrite.checkpoint.model_dir import MODEL_CLASSES
from jaxwrite.common import InputError
from jaxwrite.models import ModelConfig, add_lora, trainable
from jaxwrite.train import OBJECTIVES, TrainConfig, model_config
from jaxwrite.train.setup import lora_spec
from jaxwrite.train.optim import make_optimizer

# GRPO rows are prompt + completion. Prompts of the LongWriter-Zero recipe are short instructions; the
# update step is compiled for rows bucketed from this many prompt tokens plus max_new_tokens
# (`--prompt-tokens` overrides it). WritingBench critic prompts (query + response + criteria) reach about
# 19k tokens; the scoring engine is compiled at that length with the critic's 2,048-token verdict budget.
GRPO_PROMPT_TOKENS = 512
CRITIC_PROMPT_TOKENS = 19_456
CRITIC_VERDICT_TOKENS = 2048
CRITIC_CONCURRENCY = 32           # LocalJudge's default max_batch


def recipe_model_config(config: TrainConfig) -> ModelConfig:
    """The ModelConfig `jaxwrite train` builds: model.init_from's own config when set (a hub id reads only
    its config.json; a GGUF file only its metadata), else the preset with vocab 0 taking the size of the
    tokenizer the run would train (tokenizer.vocab_size), as there is no tokenizer file to read here."""
    if config.model.get("init_from"):
        return model_config(config.model, None)
    vocab = config.model.vocab_size or config.tokenizer.vocab_size
    return model_config(config.model, vocab)


@dataclasses.dataclass(frozen=True)
class AbstractRun:
    config: TrainConfig
    model_cfg: ModelConfig
    model: nnx.Module          # abstract: every variable a ShapeDtypeStruct
    optimizer: nnx.Optimizer   # abstract


def abstract_run(config: TrainConfig) -> AbstractRun:
    objective = OBJECTIVES.get(config.objective)
    cfg = recipe_model_config(config)
    cls = MODEL_CLASSES[objective.model_class]
    tx, _ = make_optimizer(config.optimizer, config.num_steps)

    lora = lora_spec(config.model)

    def build():
        model = cls(cfg, nnx.Rngs(config.seed))
        if lora is not None:   # as jaxwrite.train.setup: adapters on, the optimiser over what the run trains
            add_lora(model, lora, config.seed)
        return model, nnx.Optimizer(model, tx, wrt=trainable(objective.model_class, lora))

    model, optimizer = nnx.eval_shape(build)
    return AbstractRun(config, cfg, model, optimizer)


def _spec(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(int(s) for s in shape), jnp.dtype(dtype))


def grpo_row_tokens(config: TrainConfig, prompt_tokens: int) -> int:
    """Row length of a GRPO update: the rollout's bucket of prompt + max_new_tokens."""
    from jaxwrite.rl.rollout import length_bucket
    return length_bucket(prompt_tokens + config.rl.max_new_tokens)


def train_batch(config: TrainConfig, prompt_tokens: int = GRPO_PROMPT_TOKENS
                ) -> tuple[dict[str, jax.ShapeDtypeStruct], int, int]:
    """Global host batch of one optimiser step -> (arrays, rows the model runs on, tokens per row)."""
    objective = config.objective
    if objective in ("lm", "critic_sft", "sft"):
        rows, seq = config.data.batch_size, config.data.seq_len
        batch = {k: _spec((rows, seq), np.int32) for k in ("tokens", "targets", "loss_mask", "segment_ids",
                                                            "positions")}
        return batch, rows, seq
    if objective == "bradley_terry":
        rows, seq = config.data.batch_size, config.data.seq_len
        batch = {"chosen_tokens": _spec((rows, seq), np.int32), "rejected_tokens": _spec((rows, seq), np.int32),
                 "chosen_length": _spec((rows,), np.int32), "rejected_length": _spec((rows,), np.int32)}
        return batch, 2 * rows, seq      # chosen and rejected rows run as one batch
    if objective == "grpo":
        rl = config.rl
        rows = rl.prompts_per_step * rl.group_size // rl.updates_per_rollout
        seq = grpo_row_tokens(config, prompt_tokens)
        batch = {"tokens": _spec((rows, seq), np.int32), "targets": _spec((rows, seq), np.int32),
                 "loss_mask": _spec((rows, seq), np.float32), "attention_mask": _spec((rows, seq), bool),
                 "sample_mask": _spec((rows,), np.float32), "logp_sampler": _spec((rows, seq), np.float32),
                 "group_rewards": _spec((rows, rl.group_size, len(rl.reward_names)), np.float32),
                 "group_index": _spec((rows,), np.int32)}
        if rl.updates_per_rollout > 1:
            batch["logp_old"] = _spec((rows, seq), np.float32)
        if rl.beta > 0:
            batch["logp_ref"] = _spec((rows, seq), np.float32)
        return batch, rows, seq
    raise InputError(f"jaxwrite compile knows no batch layout for objective '{objective}'", field="objective")


def microbatched(batch: dict[str, jax.ShapeDtypeStruct], accum: int) -> dict[str, jax.ShapeDtypeStruct]:
    """[rows, ...] -> [accum, rows / accum, ...], as StepFunctions.train splits a host batch."""
    if accum == 1:
        return batch
    out = {}
    for k, v in batch.items():
        if v.shape[0] % accum:
            raise InputError(f"batch of {v.shape[0]} rows is not divisible by grad_accum_steps {accum}",
                             field="grad_accum_steps")
        out[k] = _spec((accum, v.shape[0] // accum) + v.shape[1:], v.dtype)
    return out
