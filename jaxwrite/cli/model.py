"""`jaxwrite model info`: parameter count, FLOPs/token and memory for a preset or a model directory."""
from __future__ import annotations

import json
import os

from jaxwrite.common import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser("model", help="inspect model configs (presets, HF dirs, GGUF files, jaxwrite "
                                            "checkpoints)")
    sub = p.add_subparsers(dest="model_command", metavar="ACTION")
    info = sub.add_parser("info", help="parameter count, FLOPs per token and weight memory")
    info.add_argument("target", nargs="?", help="preset name, or a model directory as `convert` reads it (Hugging "
                                                "Face dir, jaxwrite model dir, trainer workdir or checkpoint step "
                                                "dir), a .gguf file (its metadata), or a Hugging Face hub id "
                                                "(ORG/NAME[@REVISION]: only its config.json is fetched); omit to "
                                                "list presets")
    info.add_argument("--seq-len", type=int, default=4096, help="sequence length for FLOPs/token")
    info.add_argument("--json", action="store_true", help="print one JSON object per model")
    info.set_defaults(func=run_info)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _config_for(target: str):
    from jaxwrite.checkpoint import pretrained_config
    from jaxwrite.common.gguf_file import is_gguf_path
    from jaxwrite.common.hub import hub_id
    from jaxwrite.models import PRESETS

    if target in PRESETS:
        return PRESETS[target]
    if not os.path.exists(os.path.expanduser(target)) and not is_gguf_path(target) and hub_id(target) is None:
        raise InputError(f"unknown preset '{target}' and no such file or directory; expected a preset "
                         f"({', '.join(PRESETS)}), a model directory, a .gguf file or a Hugging Face hub id "
                         "(ORG/NAME)", path=target)
    # A hub id -> its snapshot, holding only config.json: the counts need no weights (a 72B model's 145 GB).
    return pretrained_config(target, field="target")[0]


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
