"""The run's tokenizer: a given tokenizer dir/file, or a small SentencePiece trained once into the workdir."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from jaxwrite.checkpoint import pretrained_tokenizer_path
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
    if not config.tokenizer.path and not config.model.get("init_from"):   # a tokenizer trained on them
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


def _check_same_tokenizer(tokenizer: Tokenizer, path: str, init_from: str) -> None:
    """tokenizer.path must spell the ids model.init_from was trained on: the same vocabulary as the
    checkpoint's own tokenizer, when it has one (a padded embedding may still be larger)."""
    own_path = pretrained_tokenizer_path(init_from, field="model.init_from")
    if own_path is None or os.path.realpath(own_path) == os.path.realpath(path):
        return
    own = load_tokenizer(own_path)
    step = max(1, min(own.vocab_size, tokenizer.vocab_size) // 64)
    probe = range(0, min(own.vocab_size, tokenizer.vocab_size), step)
    if own.vocab_size != tokenizer.vocab_size or any(own.id_to_token(i) != tokenizer.id_to_token(i) for i in probe):
        raise InputError(f"vocabulary of {tokenizer.vocab_size} tokens differs from model.init_from's own tokenizer "
                         f"({own_path}, {own.vocab_size} tokens); expected the checkpoint's tokenizer (leave "
                         "tokenizer.path empty to use it)", path=path, field="tokenizer.path")


def setup_tokenizer(config: "TrainConfig", workdir: str) -> tuple[Tokenizer, str]:
    """(tokenizer, its directory or file). `tokenizer.path` when set; else model.init_from's own tokenizer
    (checked, like a given one, to be the checkpoint's vocabulary); else trains into <workdir>/tokenizer.

    The trained tokenizer is cached: a resumed run reuses it, so token ids never change mid-run.
    """
    tok_cfg = config.tokenizer
    init_from = config.model.get("init_from", "")
    if tok_cfg.path:
        # A hub id (ORG/NAME) resolves to its snapshot, downloading only the tokenizer files.
        path = resolve_pretrained(tok_cfg.path, field="tokenizer.path", files=TOKENIZER_FILES)
        path = os.path.abspath(path)
        tokenizer = load_tokenizer(path)
        if init_from:
            _check_same_tokenizer(tokenizer, path, init_from)
        return tokenizer, path
    if init_from:
        # A pretrained model comes with its tokenizer: the run uses it unless tokenizer.path names another.
        path = pretrained_tokenizer_path(init_from, field="model.init_from")
        if path is None:
            raise InputError("model.init_from has no tokenizer of its own; expected tokenizer.path to name the "
                             "checkpoint's tokenizer", path=init_from, field="tokenizer.path")
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
