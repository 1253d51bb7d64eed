"""`jaxwrite train --config configs/X.py --workdir W [--config.KEY=VALUE ...]`."""
from __future__ import annotations

import argparse
import sys

from jaxwrite.common import load_config


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


def run(args: argparse.Namespace) -> int:
    # jax import deferred: `jaxwrite --help` stays fast. The objective's own setup (GRPO trains the
    # policy and reward model it starts from) runs inside train().
    from jaxwrite.train import TrainConfig, TrainingDiverged, train

    recipe = load_config(args.config, args.config_overrides)
    if args.data_dir:
        recipe.data_dir = args.data_dir
    config = TrainConfig.from_recipe(recipe)   # every field checked: a bad one fails here, in one line
    # Before anything touches a device: joins the other hosts of a pod slice / cluster (no-op alone).
    from jaxwrite.parallel import initialize_distributed
    initialize_distributed(config.distributed.to_dict())

    try:
        return train(config, args.workdir)
    except TrainingDiverged as err:
        print(f"jaxwrite train: error: {err}", file=sys.stderr)
        return 1
