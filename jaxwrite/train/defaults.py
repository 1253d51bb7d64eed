"""The config fields every training recipe has, with defaults; recipes in configs/ fill in the rest.

data_dir: "" (found at run time by the one data-dir rule, jaxwrite.common.data_dir: `--data-dir`, else
`$JAXWRITE_DATA_DIR`, else what `jaxwrite data download` wrote, else `../shared/data` beside a checkout,
else the embedded sample), or a folder given with `jaxwrite train --data-dir DIR` / `--config.data_dir=DIR`.
"""
from __future__ import annotations

import ml_collections


def base_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.objective = "lm"                    # jaxwrite.train.OBJECTIVES: lm | critic_sft | sft | bradley_terry
    c.seed = 0
    c.data_dir = ""                       # "": the data-dir rule (jaxwrite.common.data_dir) at run time
    c.num_steps = 100
    c.log_every = 10
    c.eval_every = 0                      # 0: never; else every N steps and at the end (if the source has eval data)
    c.checkpoint_every = 50
    c.keep_checkpoints = 3
    c.grad_accum_steps = 1
    c.mesh = (1, -1, 1)                   # (data, fsdp, tensor); one -1 is filled from the device count
    c.peak_flops_per_device = 0.0         # 0: table for TPUs/GPUs, measured matmul peak on CPU
    c.progress_bar = True
    # Steps traced with jax.profiler into <workdir>/tensorboard: "FIRST,LAST" or "N"; "" = off.
    c.profile_steps = ""

    # Trackers beside metrics.jsonl (jaxwrite.train.tracking): tensorboard, wandb. Setting wandb_project
    # adds wandb (pip install 'jaxwrite[wandb]'); wandb_mode "offline" keeps the run local.
    c.logging = ml_collections.ConfigDict({"trackers": ("tensorboard",), "wandb_project": "", "wandb_entity": "",
                                           "wandb_run_name": "", "wandb_mode": ""})

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

    c.tokenizer = ml_collections.ConfigDict()
    c.tokenizer.path = ""                 # tokenizer dir or file; "" = train SentencePiece into <workdir>/tokenizer
    c.tokenizer.train_files = ("corpus_en", "corpus_zh")   # under data_dir, for the trained tokenizer
    c.tokenizer.vocab_size = 4096
    c.tokenizer.character_coverage = 0.99  # the rest falls back to bytes (keeps zh coverage in a small vocab)
    c.tokenizer.input_sentence_size = 20000

    # Multi-host start-up (jaxwrite.parallel.initialize_distributed): None = take it from the
    # environment (JAXWRITE_COORDINATOR, ...), or auto-detect on a TPU pod slice, or a single process.
    c.distributed = ml_collections.ConfigDict({"coordinator_address": None, "num_processes": None,
                                               "process_id": None, "local_device_ids": None,
                                               "initialization_timeout": None})

    c.optimizer = ml_collections.ConfigDict()
    c.optimizer.learning_rate = 3e-4
    c.optimizer.warmup_steps = 10
    c.optimizer.min_lr_ratio = 0.1
    c.optimizer.weight_decay = 0.1
    c.optimizer.b1 = 0.9
    c.optimizer.b2 = 0.95
    c.optimizer.eps = 1e-8
    c.optimizer.clip_norm = 1.0
    return c


def lm_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "lm_corpus" source (continual pretraining on the local corpora mix)."""
    return ml_collections.ConfigDict({
        "mixture": "longwriter_zero", "seq_len": seq_len, "batch_size": batch_size, "max_chars": 20_000,
        "eval_holdout": ("corpus_en/pg11.txt", "corpus_zh/pg27166.txt"), "eval_batches": 4,
        # More training sources beside the local corpora, name -> {kind, path, weight, ...}; weights are
        # shares of the whole mix (e.g. GRPO's think/answer documents, rl/protocol_docs.py).
        "extra_sources": ml_collections.ConfigDict()})


def sft_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "critic_sft" / "writer_sft" sources (chat jsonl files, loss on the assistant)."""
    return ml_collections.ConfigDict({
        "train_path": "", "eval_path": "", "seq_len": seq_len, "batch_size": batch_size, "pack": True,
        "on_long": "error",
        # Contamination guard: records whose query overlaps a WritingBench query are refused.
        "benchmark_path": "writingbench/benchmark_all.jsonl", "on_overlap": "error", "allow_overlap": False,
        "eval_batches": 0})


def preference_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "preference_pairs" source (WritingPreferenceBench pool, split by prompt)."""
    return ml_collections.ConfigDict({
        "pool_path": "preferences/writingpreferencebench_zh_pool/responses_with_human_scores.jsonl.gz",
        "min_delta": 1.0, "eval_fraction": 0.1, "seq_len": seq_len, "batch_size": batch_size,
        "truncation": "response", "max_train_pairs": 0, "max_eval_pairs": 0, "eval_batches": 0})


def degraded_pair_data(seq_len: int, batch_size: int) -> ml_collections.ConfigDict:
    """`data` group of the "preference_pairs" source on SYNTHETIC pairs (data_pipelines.degraded_pairs):
    a corpus passage (chosen) against a degraded copy (rejected), whole books held out for eval."""
    return ml_collections.ConfigDict({
        "kind": "degraded_corpus", "corpora": ("corpus_en", "corpus_zh"),
        "degradations": ("shuffle", "scramble", "repeat", "truncate"), "passages_per_book": 200,
        # Passages short enough that original and degraded copy fit seq_len untruncated.
        "passage_chars_en": (150, 300), "passage_chars_zh": (60, 110),
        "eval_fraction": 0.2, "seq_len": seq_len, "batch_size": batch_size, "truncation": "response",
        "max_train_pairs": 0, "max_eval_pairs": 0, "eval_batches": 0,
        "train_label_swap": 0.0})   # control: 0.5 swaps half the training labels at random


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
