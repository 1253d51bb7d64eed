"""`jaxwrite train --config configs/X.py --workdir W [--config.KEY=VALUE ...]`."""
from __future__ import annotations

import argparse
import sys

from jaxwrite.common import InputError, load_config


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help="train or resume a recipe (continual pretraining, critic SFT, SFT, reward model, GRPO)",
        description="Runs the recipe in --config inside --workdir. Re-running the same command resumes "
                    "exactly from the latest checkpoint. SIGTERM saves a checkpoint and exits 0. "
                    "Override any config field with --config.KEY=VALUE (e.g. --config.num_steps=40).")
    parser.add_argument("--config", required=True,
                        help="a recipe file with get_config() (configs/cpt_tiny.py, X.py:v5p-128) or a shipped "
                             "recipe's name (cpt_tiny, rm_qwen2.5_72b:v5p-128)")
    parser.add_argument("--workdir", required=True, help="checkpoints, metrics.jsonl, TensorBoard events")
    parser.add_argument("--data-dir", help="data root (writingbench/, corpus_en/, ...; the word `sample` = the "
                                           "embedded sample); default: $JAXWRITE_DATA_DIR, else what `jaxwrite "
                                           "data download` wrote, else ../shared/data beside a checkout, else "
                                           "the embedded sample. Same as --config.data_dir=DIR")
    parser.set_defaults(func=run, takes_config=True)


# Config fields that count something and must be positive (a 0 would fail deep inside the data pipeline
# or the loop); and fields where 0 means "off" or "from the preset" but a negative value means nothing.
_POSITIVE = ("batch_size", "seq_len", "num_steps", "grad_accum_steps", "log_every", "keep_checkpoints",
             "group_size", "prompts_per_step", "max_new_tokens", "updates_per_rollout", "engine_chunk_steps",
             "engine_max_batch")
_NON_NEGATIVE = ("eval_every", "checkpoint_every", "warmup_steps", "eval_batches", "num_layers", "vocab_size",
                 "seed", "max_eval_pairs", "max_train_pairs", "rm_max_len", "samples_every", "samples_prompts")


def check_counts(config, prefix: str = "") -> None:
    """Raises InputError naming the `--config.` key of a count field outside its range."""
    import ml_collections
    for key, value in config.items():
        path = prefix + key
        if isinstance(value, ml_collections.ConfigDict):
            check_counts(value, path + ".")
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        leaf = key.rsplit(".", 1)[-1]
        if (leaf in _POSITIVE or leaf.endswith("batch_size")) and value < 1:
            raise InputError(f"--config.{path}={value}: expected a positive integer")
        if leaf in _NON_NEGATIVE and value < 0:
            raise InputError(f"--config.{path}={value}: expected a non-negative integer")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.config_overrides)
    if args.data_dir:
        config.data_dir = args.data_dir
    check_counts(config)
    # Before anything touches a device: joins the other hosts of a pod slice / cluster (no-op alone).
    from jaxwrite.parallel import initialize_distributed
    initialize_distributed(config.get("distributed"))

    # jax import deferred: `jaxwrite --help` stays fast. The objective's own setup (GRPO trains the
    # policy and reward model it starts from) runs inside train().
    from jaxwrite.train import TrainingDiverged, train

    try:
        return train(config, args.workdir)
    except TrainingDiverged as err:
        print(f"jaxwrite train: error: {err}", file=sys.stderr)
        return 1
