"""`jaxwrite convert`: Hugging Face directory or GGUF file <-> jaxwrite model dir (Orbax), streaming tensors."""
from __future__ import annotations

import os
import shutil
import tempfile

from jaxwrite.common import InputError

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                    "merges.txt", "generation_config.json", "tokenizer.model", "chat_template.jinja")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "convert", help="convert between Hugging Face / GGUF checkpoints and jaxwrite checkpoints",
        description="Direction is detected from SRC: a Hugging Face directory (config.json + *.safetensors) or "
                    "a llama.cpp .gguf file (dequantized; tokenizer and chat template from its metadata) becomes "
                    "a jaxwrite model dir; a jaxwrite model dir / trainer checkpoint / workdir becomes a Hugging "
                    "Face directory that transformers loads. --to hf writes any source as a Hugging Face dir.")
    p.add_argument("src", help="Hugging Face dir or hub id (ORG/NAME), .gguf file, jaxwrite model dir, trainer "
                               "workdir or checkpoint step dir")
    p.add_argument("dst", help="output directory (must not exist or be empty)")
    p.add_argument("--to", choices=["jaxwrite", "hf"], default=None,
                   help="output format (default: jaxwrite for a Hugging Face or GGUF source, hf for a jaxwrite one)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="parameter dtype written (default float32)")
    p.set_defaults(func=run)


def _tokenizer_files(src: str, kind: str, out_dir: str) -> str | None:
    """The source's tokenizer as files in `out_dir` (a GGUF's written as tokenizer.json and configs)."""
    from jaxwrite.checkpoint import pretrained_tokenizer_path
    from jaxwrite.checkpoint.pretrained import GGUF, HF

    if kind == GGUF:
        from jaxwrite.text import gguf_tokenizer
        gguf_tokenizer(src).save_pretrained(out_dir)
        return out_dir
    if kind == HF:
        found = [f for f in _TOKENIZER_FILES if os.path.exists(os.path.join(src, f))]
        for fname in found:
            shutil.copy(os.path.join(src, fname), out_dir)
        return out_dir if found else None
    return pretrained_tokenizer_path(src)


def run(args) -> int:
    from jaxwrite.checkpoint import load_pretrained, resolve_source, save_model_dir
    from jaxwrite.checkpoint.pretrained import JAXWRITE
    from jaxwrite.models import save_hf

    if os.path.exists(args.dst) and not os.path.isdir(args.dst):
        raise InputError("destination is an existing file; expected a new directory", path=args.dst)
    if os.path.exists(args.dst) and os.listdir(args.dst):
        raise InputError("destination exists and is not empty; expected a new directory", path=args.dst)
    src, kind = resolve_source(args.src, field="src")   # a hub id (ORG/NAME) converts from its cached snapshot
    to = args.to or ("hf" if kind == JAXWRITE else "jaxwrite")
    # An HF or GGUF import is read in the dtype written (float16 is stored from float32 parameters).
    dtype = args.dtype if args.dtype != "float16" else None
    model = load_pretrained(src, dtype=None if kind == JAXWRITE else dtype)
    with tempfile.TemporaryDirectory() as tok_dir:
        tokenizer = _tokenizer_files(src, kind, tok_dir)
        if to == "jaxwrite":
            save_model_dir(args.dst, model, model.cfg, tokenizer_dir=tokenizer)
            print(f"wrote jaxwrite model dir {args.dst} ({model.cfg.summary()})")
        else:
            save_hf(model, args.dst, dtype=args.dtype, tokenizer_dir=tokenizer)
            print(f"wrote Hugging Face dir {args.dst} ({model.cfg.summary()})")
    return 0
