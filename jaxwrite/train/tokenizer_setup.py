"""The run's tokenizer: a given tokenizer dir/file, or a small SentencePiece trained once into the workdir."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from jaxwrite.common import InputError, find_data_dir
from jaxwrite.common.hub import TOKENIZER_FILES, resolve_pretrained
from jaxwrite.text import Tokenizer, load_tokenizer, train_sentencepiece

if TYPE_CHECKING:
    from jaxwrite.train.config import TrainConfig


def resolve_data_dir(config: "TrainConfig", *needs: str) -> str:
    """The run's data root by the one data-dir rule (`config.data_dir` is the explicit choice; "" = the
    defaults, the embedded sample last), checked to hold `needs` (paths under it)."""
    return str(find_data_dir(config.data_dir or None, needs, sample_ok=True, flag="--data-dir"))


def run_data_needs(config: "TrainConfig") -> tuple[str, ...]:
    """What a run reads under its data root, from the fields that name it: the trained tokenizer's text,
    held-out books, the contamination guard's benchmark, the preference pool or the degraded corpora.
    train() resolves the root once with these, so every reader sees the same root."""
    needs: list[str] = []
    if not config.tokenizer.path:
        needs += list(config.tokenizer.train_files)
    data = config.data
    if data is not None:
        needs += list(data.data_needs())
    return tuple(dict.fromkeys(needs))


def training_text_files(data_dir: str, entries) -> list[str]:
    """Text files named by `entries` (files or folders under data_dir; folders contribute pg*.txt)."""
    files: list[str] = []
    for entry in entries:
        path = os.path.join(data_dir, entry)
        if os.path.isdir(path):
            found = sorted(os.path.join(path, n) for n in os.listdir(path)
                           if n.startswith("pg") and n.endswith(".txt"))
            if not found:
                raise InputError("expected pg*.txt files in this folder", path=path, field="tokenizer.train_files")
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise InputError("not found", path=path, field="tokenizer.train_files")
    return files


def setup_tokenizer(config: "TrainConfig", workdir: str) -> tuple[Tokenizer, str]:
    """(tokenizer, its directory or file). Trains into <workdir>/tokenizer when `tokenizer.path` is empty.

    The trained tokenizer is cached: a resumed run reuses it, so token ids never change mid-run.
    """
    tok_cfg = config.tokenizer
    if tok_cfg.path:
        # A hub id (ORG/NAME) resolves to its snapshot, downloading only the tokenizer files.
        path = os.path.abspath(resolve_pretrained(tok_cfg.path, field="tokenizer.path", files=TOKENIZER_FILES))
        return load_tokenizer(path), path
    out_dir = os.path.join(workdir, "tokenizer")
    if not os.path.exists(os.path.join(out_dir, "tokenizer.model")):
        if not tok_cfg.train_files:
            raise InputError("expected a tokenizer directory (the base model's) in tokenizer.path",
                             field="tokenizer.path")
        files = training_text_files(resolve_data_dir(config), tok_cfg.train_files)
        tmp = out_dir + ".partial"
        train_sentencepiece(files, tmp, tok_cfg.vocab_size, input_sentence_size=tok_cfg.input_sentence_size,
                            character_coverage=tok_cfg.character_coverage, seed=config.seed,
                            option_names={"vocab_size": "--config.tokenizer.vocab_size",
                                          "character_coverage": "--config.tokenizer.character_coverage"})
        os.replace(tmp, out_dir)   # a killed training leaves no half-written tokenizer behind
    return load_tokenizer(out_dir), out_dir
