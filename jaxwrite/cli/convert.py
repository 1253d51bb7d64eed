"""`jaxwrite convert`: Hugging Face directory <-> jaxwrite model dir (Orbax), streaming tensors."""
from __future__ import annotations

import os
import shutil
import tempfile

from jaxwrite.common import InputError

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                    "merges.txt", "generation_config.json", "tokenizer.model", "chat_template.jinja")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "convert", help="convert between a Hugging Face directory and a jaxwrite checkpoint",
        description="Direction is detected from SRC: a Hugging Face directory (config.json + *.safetensors) "
                    "becomes a jaxwrite model dir; a jaxwrite model dir / trainer checkpoint / workdir "
                    "becomes a Hugging Face directory that transformers loads.")
    p.add_argument("src", help="Hugging Face dir or hub id (ORG/NAME), jaxwrite model dir, trainer workdir "
                               "or checkpoint step dir")
    p.add_argument("dst", help="output directory (must not exist or be empty)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="parameter dtype written (default float32)")
    p.set_defaults(func=run)


def is_hf_dir(path: str) -> bool:
    """How `convert` (and `model info`) tell the formats apart: a Hugging Face dir has config.json and no
    model_config.json; anything else is read as a jaxwrite model dir, trainer workdir or step dir."""
    return os.path.exists(os.path.join(path, "config.json")) and not os.path.exists(
        os.path.join(path, "model_config.json"))


def run(args) -> int:
    from jaxwrite.checkpoint import load_model_from_checkpoint, save_model_dir, tokenizer_dir_of
    from jaxwrite.common.hub import resolve_pretrained
    from jaxwrite.models import load_hf, save_hf

    args.src = resolve_pretrained(args.src)   # a hub id (ORG/NAME) converts from its cached snapshot
    if not os.path.exists(args.src):
        raise InputError("source not found", path=args.src)
    if os.path.exists(args.dst) and not os.path.isdir(args.dst):
        raise InputError("destination is an existing file; expected a new directory", path=args.dst)
    if os.path.exists(args.dst) and os.listdir(args.dst):
        raise InputError("destination exists and is not empty; expected a new directory", path=args.dst)
    if is_hf_dir(args.src):
        model = load_hf(args.src, dtype=args.dtype if args.dtype != "float16" else None)
        with tempfile.TemporaryDirectory() as tok_dir:
            found = [f for f in _TOKENIZER_FILES if os.path.exists(os.path.join(args.src, f))]
            for fname in found:
                shutil.copy(os.path.join(args.src, fname), tok_dir)
            save_model_dir(args.dst, model, model.cfg, tokenizer_dir=tok_dir if found else None)
        print(f"wrote jaxwrite model dir {args.dst} ({model.cfg.summary()})")
    else:
        model, cfg = load_model_from_checkpoint(args.src)
        save_hf(model, args.dst, dtype=args.dtype, tokenizer_dir=tokenizer_dir_of(args.src))
        print(f"wrote Hugging Face dir {args.dst} ({cfg.summary()})")
    return 0
