"""`jaxwrite model info`: parameter count, FLOPs/token and memory for a preset or a model directory."""
from __future__ import annotations

import json
import os

from jaxwrite.common import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser("model", help="inspect model configs (presets, HF dirs, jaxwrite checkpoints)")
    sub = p.add_subparsers(dest="model_command", metavar="ACTION")
    info = sub.add_parser("info", help="parameter count, FLOPs per token and weight memory")
    info.add_argument("target", nargs="?", help="preset name, or a model directory as `convert` reads it (Hugging "
                                                "Face dir, jaxwrite model dir, trainer workdir or checkpoint step "
                                                "dir), or a Hugging Face hub id (ORG/NAME[@REVISION]: only its "
                                                "config.json is fetched); omit to list presets")
    info.add_argument("--seq-len", type=int, default=4096, help="sequence length for FLOPs/token")
    info.add_argument("--json", action="store_true", help="print one JSON object per model")
    info.set_defaults(func=run_info)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _config_for(target: str):
    from jaxwrite.checkpoint import read_model_config
    from jaxwrite.checkpoint.model_dir import is_model_dir
    from jaxwrite.cli.convert import is_hf_dir
    from jaxwrite.common.hub import resolve_pretrained
    from jaxwrite.models import PRESETS, config_from_hf
    from jaxwrite.models.hf_config import read_hf_config

    if target in PRESETS:
        return PRESETS[target]
    # A hub id -> its snapshot, holding only config.json: the counts need no weights (a 72B model's 145 GB).
    target = resolve_pretrained(target, field="target", files=("config.json",))
    if not os.path.isdir(target):
        raise InputError(f"unknown preset '{target}' and no such directory; expected a preset "
                         f"({', '.join(PRESETS)}), a model directory or a Hugging Face hub id (ORG/NAME)",
                         path=target)
    if is_hf_dir(target):
        return config_from_hf(read_hf_config(target), source=os.path.join(target, "config.json"))
    if not is_model_dir(target):
        raise InputError("expected a model directory: a Hugging Face config.json here, or jaxwrite's "
                         "model_config.json here, in checkpoints/ (a trainer workdir), or in the parent of a "
                         "step folder", path=target)
    return read_model_config(target)[0]   # model dir, checkpoint root, trainer workdir or step dir


def run_info(args) -> int:
    from jaxwrite.models import PRESETS

    names = [args.target] if args.target else list(PRESETS)
    for name in names:
        cfg = _config_for(name)
        record = {
            "model": name,
            "params": cfg.param_count(),
            "params_non_embedding": cfg.param_count(include_embeddings=False),
            "train_flops_per_token": cfg.flops_per_token(args.seq_len),
            "seq_len": args.seq_len,
            "bf16_weight_gib": round(cfg.param_count() * 2 / 2**30, 2),
        }
        if args.json:
            print(json.dumps(record))
        else:
            print(f"{name:16s} params {record['params'] / 1e6:11,.1f}M  "
                  f"train FLOPs/token@{args.seq_len} {record['train_flops_per_token'] / 1e9:9.2f}G  "
                  f"bf16 weights {record['bf16_weight_gib']:7.2f} GiB")
    return 0
