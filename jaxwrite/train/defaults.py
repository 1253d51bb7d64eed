"""The recipe groups every training recipe starts from; recipes in configs/ fill in the rest.

Each default is written once, in the typed settings (jaxwrite.train.config, .data_config,
jaxwrite.rl.RLConfig); these functions give a recipe those defaults as ml-collections groups, so
`--config.KEY=VALUE` finds every key typed by its default. The `model` group is written out here: it
becomes a ModelConfig in jaxwrite.train.setup.model_config.

data_dir: "" (found at run time by the one data-dir rule, jaxwrite.common.data_dir: `--data-dir`, else
`$JAXWRITE_DATA_DIR`, else what `jaxwrite data download` wrote, else `../shared/data` beside a checkout,
else the embedded sample), or a folder given with `jaxwrite train --data-dir DIR` / `--config.data_dir=DIR`.
"""
from __future__ import annotations

import ml_collections

from jaxwrite.train.config import TrainConfig
from jaxwrite.train.data_config import ChatSFTData, DegradedPairData, LMCorpusData, PreferencePoolData


def base_config() -> ml_collections.ConfigDict:
    """Every run's settings at their defaults (TrainConfig), without a data or rl section."""
    c = ml_collections.ConfigDict({k: v for k, v in TrainConfig.defaults().items() if k not in ("data", "rl")})
    c.model = ml_collections.ConfigDict()
    c.model.preset = "tiny"               # jaxwrite.models.PRESETS (unused with init_from: the checkpoint's own)
    c.model.vocab_size = 0                # 0: init_from's, else the tokenizer's; set: must match init_from's
    c.model.num_layers = 0                # 0: init_from's, else the preset's; set: must match init_from's
    c.model.dtype = "float32"             # compute dtype: float32 | bfloat16
    c.model.param_dtype = "float32"
    c.model.remat = "none"                # none | full | dots
    c.model.attention = "auto"            # auto | reference | blockwise | splash | cudnn (docs/TPU.md)
    c.model.attention_block = 512         # query / key block of the blockwise and splash paths
    c.model.init_from = ""                # HF dir / hub id, jaxwrite checkpoint or .gguf; "" = random init
    c.model.lora = ml_collections.ConfigDict()   # low-rank adapters (jaxwrite.models.lora); rank 0 = off
    c.model.lora.rank = 0                 # R: train only W + (alpha / R) A B on the targets, the base frozen
    c.model.lora.alpha = 16.0
    c.model.lora.targets = "all"          # all | attention | mlp | a list of q,k,v,o,gate,up,down (or *_proj)
    c.model.lora.base_dtype = "bfloat16"  # the frozen base's storage (replaces param_dtype); adapters: float32
    return c


def lm_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "lm_corpus" source (continual pretraining on the local corpora mix)."""
    return LMCorpusData(seq_len=seq_len, batch_size=batch_size).to_config_dict()


def sft_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "critic_sft" / "writer_sft" sources (chat jsonl files, loss on the assistant)."""
    return ChatSFTData(seq_len=seq_len, batch_size=batch_size).to_config_dict()


def preference_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "preference_pairs" source (WritingPreferenceBench pool, split by prompt)."""
    return PreferencePoolData(seq_len=seq_len, batch_size=batch_size).to_config_dict()


def degraded_pair_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "preference_pairs" source on SYNTHETIC pairs (data_pipelines.degraded_pairs):
    a corpus passage (chosen) against a degraded copy (rejected), whole books held out for eval."""
    return DegradedPairData(seq_len=seq_len, batch_size=batch_size).to_config_dict()


def epoch_steps(num_records: int, num_epochs: int, batch_size: int) -> int:
    """Optimizer steps for `num_epochs` passes over `num_records` examples at a global batch of
    `batch_size` examples (one example per row: data.pack=False). The stream runs across epoch
    boundaries, so the count is floor(records × epochs / batch), not per-epoch rounding."""
    return max(1, (int(num_records) * int(num_epochs)) // int(batch_size))


def steps_from_epochs(c: ml_collections.ConfigDict, num_records: int, num_epochs: int) -> None:
    """Makes `c.num_steps` follow `c.data.num_records`, `c.num_epochs` and `c.data.batch_size` lazily,
    so `--config.data.num_records=N` (the record count `jaxwrite data critic-data` prints) re-derives
    the steps. The trainer reads num_steps before it loads data, hence the count is a config field.
    Setting `--config.num_steps` directly still wins."""
    c.num_epochs = int(num_epochs)
    c.data.num_records = int(num_records)
    c.num_steps = (c.data.get_ref("num_records") * c.get_ref("num_epochs")) // c.data.get_ref("batch_size")
