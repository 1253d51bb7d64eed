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
    parser.add_argument("--config", required=True, help="recipe file with get_config(), e.g. configs/cpt_tiny.py")
    parser.add_argument("--workdir", required=True, help="checkpoints, metrics.jsonl, TensorBoard events")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.config_overrides)
    # Before anything touches a device: joins the other hosts of a pod slice / cluster (no-op alone).
    from jaxwrite.parallel import initialize_distributed
    initialize_distributed(config.get("distributed"))

    import jaxwrite.rl  # noqa: F401  (registers the "grpo" objective)
    from jaxwrite.train import TrainingDiverged, train   # jax import deferred: `jaxwrite --help` stays fast

    try:
        if config.objective == "grpo":
            config = jaxwrite.rl.prepare_grpo(config, args.workdir)
        return train(config, args.workdir)
    except TrainingDiverged as err:
        print(f"jaxwrite train: error: {err}", file=sys.stderr)
        return 1
