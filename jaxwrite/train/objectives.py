"""Training objectives, chosen by name: each entry says everything in which objectives differ.

An objective gives the model class it trains, its loss `loss_fn(model, batch, rng) -> (loss, metrics)`
(a float32 scalar and a dict of float32 scalars averaged over microbatches), the batch source built for
the run, its model FLOPs per token (for MFU), and optionally state besides the model (`init_extra`;
the trainer then calls `loss_fn(model, batch, rng, extra=...)` and checkpoints nothing else) and a
`prepare` step run before the trainer is built (GRPO trains the policy and reward model it starts from).
It also names the recipe sections it reads: the kinds of `data` its batch source takes, and the class of
an `rl` section (jaxwrite.train.config checks a recipe against them at load).

Objectives defined above train (GRPO lives in jaxwrite.rl, which imports train) are listed here by name
with the module that registers them, and that module is imported on the first lookup of the name. So a
recipe's `objective = "grpo"` works from any caller with no import for its side effect, a typo lists
every known name in one line, and no module of train imports rl (the table names a module; it does
not depend on it).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING, Any, Callable

import jax
from flax import nnx
from jax.sharding import Mesh

from jaxwrite.checkpoint.model_dir import MODEL_CLASSES
from jaxwrite.common import InputError, Registry
from jaxwrite.models import ModelConfig
from jaxwrite.text import Tokenizer
from jaxwrite.train.batches import BATCH_SOURCES, BatchSource
from jaxwrite.train.losses import bradley_terry_loss, masked_next_token_loss

if TYPE_CHECKING:
    from jaxwrite.train.config import TrainConfig

LossFn = Callable[..., tuple[jax.Array, dict[str, jax.Array]]]


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What a batch source may draw on. Rollout sources sample from the very model being trained."""
    config: "TrainConfig"
    tokenizer: Tokenizer
    model: nnx.Module
    mesh: Mesh
    rules: Any
    workdir: str = ""            # the run's folder, for what a source writes beside the metrics ("" = none)


SourceFactory = Callable[[RunContext], BatchSource]


def data_source(name: str) -> SourceFactory:
    """The named source of BATCH_SOURCES (built from the config and tokenizer alone). Looked up now,
    so a misspelt source fails when the objective is registered."""
    make = BATCH_SOURCES.get(name)
    return lambda run: make(run.config, run.tokenizer)


def lm_flops(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token of a language model at this sequence length."""
    return cfg.flops_per_token(seq_len)


def reward_model_flops(cfg: ModelConfig, seq_len: int) -> float:
    """As lm_flops, less the LM head a reward model does not have (fwd + bwd: 3 × 2 FLOPs per weight)."""
    return cfg.flops_per_token(seq_len) - 3 * 2 * cfg.vocab_size * cfg.d_model


@dataclasses.dataclass(frozen=True)
class Objective:
    model_class: str                 # a key of jaxwrite.checkpoint.MODEL_CLASSES
    loss_fn: LossFn
    batch_source: SourceFactory
    flops_per_token: Callable[[ModelConfig, int], float] = lm_flops
    init_extra: Callable[["TrainConfig", nnx.Module], Any] | None = None
    # (config, workdir) -> the config to train; may train what the run starts from.
    prepare: Callable[["TrainConfig", str], "TrainConfig"] | None = None
    # The `data.kind`s the batch source reads (the first when a recipe names none); () = no data section.
    data_kinds: tuple[str, ...] = ()
    # The class of the recipe's `rl` section (a jaxwrite.common.settings.Settings); None = no rl section.
    rl_section: type | None = None
    # config -> the devices the training mesh spans (GRPO keeps a rollout mesh apart); None = all of them.
    train_devices: Callable[["TrainConfig"], list] | None = None

    def __post_init__(self):
        if self.model_class not in MODEL_CLASSES:
            raise ValueError(f"model_class '{self.model_class}': expected one of {', '.join(sorted(MODEL_CLASSES))}")


class ObjectiveRegistry:
    """Objectives by name: those registered, and those whose module registers them on first lookup."""

    def __init__(self):
        self._registered: Registry[Objective] = Registry("objective")
        self._modules: dict[str, str] = {}

    def register(self, name: str) -> Callable[[Objective], Objective]:
        return self._registered.register(name)

    def register_module(self, name: str, module: str) -> None:
        """`name` is registered by importing `module` (an objective defined outside train)."""
        self._modules[name] = module

    def names(self) -> list[str]:
        return sorted(set(self._registered.names()) | set(self._modules))

    def __contains__(self, name: str) -> bool:
        return name in self._registered or name in self._modules

    def get(self, name: str) -> Objective:
        """The objective; a one-line InputError listing the known names when there is none."""
        if name not in self:
            raise InputError(f"unknown objective '{name}'; expected one of: {', '.join(self.names())}",
                             field="objective")
        if name not in self._registered:
            importlib.import_module(self._modules[name])
            if name not in self._registered:
                raise RuntimeError(f"importing {self._modules[name]} did not register objective '{name}'")
        return self._registered.get(name)


OBJECTIVES = ObjectiveRegistry()
OBJECTIVES.register("lm")(Objective("transformer", masked_next_token_loss, data_source("lm_corpus"),
                                    data_kinds=("lm_corpus",)))
OBJECTIVES.register("critic_sft")(Objective("transformer", masked_next_token_loss, data_source("critic_sft"),
                                            data_kinds=("chat_sft",)))
OBJECTIVES.register("sft")(Objective("transformer", masked_next_token_loss, data_source("writer_sft"),
                                     data_kinds=("chat_sft",)))
OBJECTIVES.register("bradley_terry")(Objective("reward_model", bradley_terry_loss, data_source("preference_pairs"),
                                               flops_per_token=reward_model_flops,
                                               data_kinds=("wpb_pool", "degraded_corpus")))
OBJECTIVES.register_module("grpo", "jaxwrite.rl.grpo")
