"""A training run's settings as one typed object, built once from the recipe.

Recipes are ml-collections files (`get_config()`, `--config.KEY=VALUE` overrides; jaxwrite.common.
configfile). `load_recipe` loads one and converts it here, once, into a frozen `TrainConfig` whose
sections are frozen dataclasses (jaxwrite.common.settings): every field typed, documented and checked,
so a misspelt key or a mistyped value fails at load with its `section.field`, before anything runs, and
everything inward reads typed values. Sections that vary by objective: `data` (one class per kind of
data, jaxwrite.train.data_config) and `rl` (the GRPO objective's jaxwrite.rl.RLConfig), each chosen
through the objective's entry. The `model` section stays the recipe's group, made immutable: it becomes
a ModelConfig in jaxwrite.train.setup.model_config.
"""
from __future__ import annotations

import os
from typing import Any

import ml_collections

from jaxwrite.common import InputError, load_config
from jaxwrite.common.settings import MISSING, Settings, setting, settings_class
from jaxwrite.train.data_config import DataConfig
from jaxwrite.train.objectives import OBJECTIVES
from jaxwrite.train.tracking import TRACKERS


@settings_class
class TokenizerConfig(Settings):
    """The run's tokenizer: a given one, or a SentencePiece trained once into <workdir>/tokenizer."""
    SECTION = "tokenizer"
    path: str = setting("", "tokenizer dir or file, or a hub id; empty = train SentencePiece into the workdir")
    train_files: tuple[str, ...] = setting(("corpus_en", "corpus_zh"), "files or folders (under the data dir) "
                                                                       "the trained tokenizer learns from")
    vocab_size: int = setting(4096, "vocabulary of the trained tokenizer", min=1)
    character_coverage: float = setting(0.99, "share of characters given their own pieces; the rest fall back "
                                              "to bytes (keeps zh coverage in a small vocabulary)", above=0, max=1)
    input_sentence_size: int = setting(20000, "sentences SentencePiece samples to train on", min=1)


@settings_class
class OptimizerConfig(Settings):
    """AdamW with linear warm-up, cosine decay and global-norm clipping (jaxwrite.train.optim)."""
    SECTION = "optimizer"
    learning_rate: float = setting(3e-4, "peak learning rate", min=0)
    warmup_steps: int = setting(10, "steps of linear warm-up from 0 to the peak", min=0)
    min_lr_ratio: float = setting(0.1, "the cosine ends at peak x this at num_steps", min=0)
    weight_decay: float = setting(0.1, "AdamW weight decay (weight matrices only)", min=0)
    b1: float = setting(0.9, "Adam first-moment decay", min=0, max=1)
    b2: float = setting(0.95, "Adam second-moment decay", min=0, max=1)
    eps: float = setting(1e-8, "Adam epsilon", min=0)
    clip_norm: float = setting(1.0, "global gradient-norm clip", above=0)


@settings_class
class LoggingConfig(Settings):
    """Trackers beside metrics.jsonl (jaxwrite.train.tracking)."""
    SECTION = "logging"
    trackers: tuple[str, ...] = setting(("tensorboard",), "tensorboard and/or wandb (metrics.jsonl is always "
                                                          "written)", choices=TRACKERS)
    wandb_project: str = setting("", "a W&B project: setting it adds wandb (pip install 'jaxwrite[wandb]')")
    wandb_entity: str = setting("", "W&B entity; empty = wandb's default")
    wandb_run_name: str = setting("", "W&B run name; empty = the workdir's name")
    wandb_mode: str = setting("", "W&B mode; empty = wandb's default, offline = keep the run local")

    def __post_init__(self):
        super().__post_init__()
        if "wandb" in self.trackers and not self.wandb_project:
            raise InputError("the wandb tracker needs a project: --config.logging.wandb_project=NAME",
                             field="logging.wandb_project")


@settings_class
class DistributedConfig(Settings):
    """Multi-host start-up (jaxwrite.parallel.initialize_distributed); None = from the environment
    (JAXWRITE_COORDINATOR, ...), else detected on a TPU slice or cluster, else one process."""
    SECTION = "distributed"
    coordinator_address: str | None = setting(None, "host:port of process 0")
    num_processes: int | None = setting(None, "processes in the run", min=1)
    process_id: int | None = setting(None, "this process's index", min=0)
    local_device_ids: tuple[int, ...] | int | None = setting(None, "devices this process uses (one id or several)")
    initialization_timeout: int | None = setting(None, "seconds to wait for the coordinator", min=1)

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.local_device_ids, int):
            object.__setattr__(self, "local_device_ids", (self.local_device_ids,))


@settings_class
class TrainConfig(Settings):
    """Everything `jaxwrite train` reads from a recipe (jaxwrite.train.defaults.base_config has the
    defaults as an ml-collections group)."""
    objective: str = setting("lm", "a name of jaxwrite.train.OBJECTIVES: lm, critic_sft, sft, bradley_terry, grpo")
    seed: int = setting(0, "seeds initialisation, data order and sampling", min=0)
    data_dir: str = setting("", "data root; empty = the data-dir rule at run time (jaxwrite.common.data_dir)")
    num_steps: int = setting(100, "optimiser steps of the run", min=1)
    num_epochs: int = setting(0, "passes over data.num_records that num_steps is derived from "
                                 "(defaults.steps_from_epochs); 0 = num_steps set directly", min=0)
    log_every: int = setting(10, "steps between metrics records", min=1)
    eval_every: int = setting(0, "steps between evaluations (and at the start and end); 0 = never", min=0)
    checkpoint_every: int = setting(50, "steps between checkpoints (and at the end)", min=1)
    keep_checkpoints: int = setting(3, "checkpoints kept", min=1)
    grad_accum_steps: int = setting(1, "microbatches a global batch is split into", min=1)
    mesh: tuple[int, ...] = setting((1, -1, 1), "(data, fsdp, tensor); one -1 is filled from the device count")
    peak_flops_per_device: float = setting(0.0, "for MFU; 0 = the table for TPUs/GPUs, a measured matmul peak "
                                                "on CPU", min=0)
    progress_bar: bool = setting(True, "a tqdm bar on process 0")
    profile_steps: str = setting("", "steps FIRST,LAST (or N) traced with jax.profiler into <workdir>/tensorboard; "
                                     "empty = off")
    logging: LoggingConfig = setting(factory=LoggingConfig, doc="trackers")
    model: ml_collections.FrozenConfigDict = setting(MISSING, "the model group (preset, init_from, dtypes, ...), "
                                                              "read by jaxwrite.train.setup.model_config")
    tokenizer: TokenizerConfig = setting(factory=TokenizerConfig, doc="the tokenizer")
    distributed: DistributedConfig = setting(factory=DistributedConfig, doc="multi-host start-up")
    optimizer: OptimizerConfig = setting(factory=OptimizerConfig, doc="the optimiser")
    data: Any = setting(None, "training data: a DataConfig of a kind the objective reads (Objective.data_kinds); "
                              "None for objectives that make their own batches (grpo)")
    rl: Any = setting(None, "GRPO settings: the objective's Objective.rl_section class (jaxwrite.rl.RLConfig)")

    def __post_init__(self):
        super().__post_init__()
        objective = OBJECTIVES.get(self.objective)   # one line listing the known objectives
        object.__setattr__(self, "data", _data_section(self.objective, objective.data_kinds, self.data))
        object.__setattr__(self, "rl", _rl_section(self.objective, objective.rl_section, self.rl))
        for key in ("vocab_size", "num_layers"):   # counts of the model group; 0 = the tokenizer's / preset's
            value = self.model.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InputError(f"expected a non-negative integer, got {value!r}", field=f"model.{key}")
        _ = self.profile_window   # a bad window fails at load

    @property
    def profile_window(self) -> tuple[int, int] | None:
        """(first, last) step of the jax.profiler window, or None when `profile_steps` is empty."""
        if not self.profile_steps:
            return None
        try:
            steps = [int(p) for p in self.profile_steps.split(",")]
        except ValueError:
            steps = []
        if len(steps) == 1:
            steps = steps * 2
        if len(steps) != 2 or not 1 <= steps[0] <= steps[1]:
            raise InputError(f"expected FIRST,LAST steps with 1 <= FIRST <= LAST (or one step N), found "
                             f"{self.profile_steps!r}", field="profile_steps")
        return steps[0], steps[1]

    @classmethod
    def from_recipe(cls, config: "TrainConfig | ml_collections.ConfigDict") -> "TrainConfig":
        """The typed run settings of a recipe (a TrainConfig is returned as it is)."""
        return config if isinstance(config, cls) else cls.from_mapping(config)


def _data_section(objective: str, kinds: tuple[str, ...], data) -> DataConfig | None:
    if data is None:
        if kinds:
            raise InputError(f"missing; objective '{objective}' reads a data section of kind {' or '.join(kinds)} "
                             "(jaxwrite.train.defaults builds one: lm_data, sft_data, ...)", field="data")
        return None
    if not kinds:
        raise InputError(f"objective '{objective}' reads no data section (its batches come from elsewhere); "
                         "remove it", field="data")
    if isinstance(data, ml_collections.ConfigDict):
        data = data.to_dict()
    if not isinstance(data, (DataConfig, dict)):
        raise InputError(f"expected a section (a ConfigDict of settings), got {data!r}", field="data")
    kind = data.kind if isinstance(data, DataConfig) else data.setdefault("kind", kinds[0])
    if kind not in kinds:
        raise InputError(f"objective '{objective}' reads data of kind {' or '.join(kinds)}, not {kind!r}",
                         field="data.kind")
    return data if isinstance(data, DataConfig) else DataConfig.from_mapping(data)


def _rl_section(objective: str, section: type[Settings] | None, rl):
    if section is None:
        if rl is not None:
            raise InputError(f"objective '{objective}' reads no rl section; remove it", field="rl")
        return None
    if rl is None:
        return section()
    if isinstance(rl, section):
        return rl
    if not isinstance(rl, (dict, ml_collections.ConfigDict)):
        raise InputError(f"expected a section (a ConfigDict of settings), got {rl!r}", field="rl")
    return section.from_mapping(rl)


def load_recipe(spec: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """A recipe file or shipped recipe name, its `--config.KEY=VALUE` overrides applied, as a TrainConfig."""
    return TrainConfig.from_recipe(load_config(spec, overrides))
