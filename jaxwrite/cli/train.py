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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.config_overrides)
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
