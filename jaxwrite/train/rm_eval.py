"""Held-out accuracy of a trained Bradley–Terry reward model on any pair set, beside the length baseline.

Rows are built exactly as the trainer builds them (data_pipelines.tokenize_pair: chat template, reward
at the end-of-turn token, an over-long response cut at its tail), and the metrics are the trainer's
(bradley_terry_loss): accuracy = share of pairs with r(chosen) > r(rejected); the length baseline =
"prefer the longer row" in tokens, ties counting one half, on the same rows. So the numbers for one
checkpoint on two pair sets (e.g. synthetic degraded pairs and WritingPreferenceBench) are comparable.
"""
from __future__ import annotations

import collections
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import data_pipelines as dp
from jaxwrite.checkpoint import load_model_from_checkpoint, tokenizer_dir_of
from jaxwrite.common import InputError
from jaxwrite.models import RewardModel
from jaxwrite.text import load_tokenizer


def held_out_pairs(config_path: str, overrides: list[str] | tuple[str, ...] = ()) -> list:
    """The eval pairs of a bradley_terry recipe exactly as its training run evaluates them (same split,
    same seeded max_eval_pairs sample), e.g. held_out_pairs("configs/rm_tiny.py") for the
    WritingPreferenceBench rows; overrides are `--config.x=y` strings (data_dir, seed, ...)."""
    from jaxwrite.train.batches import preference_splits
    from jaxwrite.train.config import load_recipe
    return preference_splits(load_recipe(config_path, list(overrides)))[1]


def _training_seq_len(checkpoint: str) -> int:
    """data.seq_len of the run that wrote `checkpoint` (its run_config.json), or 0 when not found."""
    path = os.path.abspath(checkpoint)
    for folder in (path, os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        cfg = os.path.join(folder, "run_config.json")
        if os.path.isfile(cfg):
            with open(cfg, encoding="utf-8") as f:
                return int(json.load(f).get("data", {}).get("seq_len", 0))
    return 0


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def evaluate_pairs(checkpoint: str, pairs, seq_len: int = 0, batch_size: int = 16,
                   truncation: str = "response") -> dict:
    """{"accuracy", "length_baseline_accuracy", "length_baseline_accuracy_chars", "pairs", "truncated",
    "dropped"[, "by_degradation"]} of the reward model in `checkpoint` on `pairs`.

    checkpoint: a trainer workdir, its checkpoints/ folder, one step folder, or a model dir.
    pairs: PreferencePair objects (DegradedPair ones also get a per-degradation breakdown) or a jsonl
    path (`jaxwrite data pairs` / `jaxwrite data degraded-pairs` output). seq_len 0: the training run's
    data.seq_len when its run_config.json is found, else the model's max_seq_len.
    """
    if isinstance(pairs, (str, os.PathLike)):
        pairs = dp.read_pairs(os.fspath(pairs))
    if not pairs:
        raise InputError("expected at least one pair", field="pairs")
    model, cfg = load_model_from_checkpoint(checkpoint)
    if not isinstance(model, RewardModel):
        raise InputError(f"expected a reward model checkpoint, found a {type(model).__name__}", path=checkpoint)
    tok_dir = tokenizer_dir_of(checkpoint)
    if tok_dir is None:
        raise InputError("checkpoint has no tokenizer/ copy", path=checkpoint)
    tokenizer = load_tokenizer(tok_dir)
    seq_len = min(int(seq_len or _training_seq_len(checkpoint) or cfg.max_seq_len), cfg.max_seq_len)

    counts, kept, rows = dp.TruncationCounts(), [], []
    for pair in pairs:
        row = dp.tokenize_pair(tokenizer, pair, seq_len, truncation, counts)
        if row is not None:
            kept.append(pair)
            rows.append(row)
    if not rows:
        raise InputError(f"all {len(pairs)} pairs dropped at seq_len {seq_len}", field="seq_len")

    graphdef, state = nnx.split(model)

    @jax.jit
    def rewards(state, tokens, lengths):
        mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
        return nnx.merge(graphdef, state)(tokens, attention_mask=mask)            # [rows]

    margins = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        pad = batch_size - len(chunk)   # a fixed batch shape: one compile for the whole set
        stack = {k: np.stack([r[k] for r in chunk] + [chunk[0][k]] * pad) for k in chunk[0]}
        tokens = np.concatenate([stack["chosen_tokens"], stack["rejected_tokens"]])        # [2·batch, seq]
        lengths = np.concatenate([stack["chosen_length"], stack["rejected_length"]])       # [2·batch]
        chosen, rejected = np.split(np.asarray(rewards(state, tokens, lengths)), 2)
        margins.extend((chosen - rejected)[:len(chunk)].tolist())
    margins = np.asarray(margins)
    hits = (margins > 0).astype(np.float64)
    longer = np.sign([int(r["chosen_length"]) - int(r["rejected_length"]) for r in rows])
    baseline = (longer + 1.0) / 2.0    # as in bradley_terry_loss: ties count one half
    out = {"accuracy": _mean(hits), "length_baseline_accuracy": _mean(baseline),
           "length_baseline_accuracy_chars": dp.length_baseline_accuracy(kept), "pairs": len(kept),
           "seq_len": seq_len, "truncated": counts.truncated, "dropped": counts.dropped}
    kinds = collections.defaultdict(list)
    for i, pair in enumerate(kept):
        if getattr(pair, "degradation", ""):
            kinds[pair.degradation].append(i)
    if kinds:
        out["by_degradation"] = {k: {"pairs": len(ix), "accuracy": _mean(hits[ix]),
                                     "length_baseline_accuracy": _mean(baseline[ix])}
                                 for k, ix in sorted(kinds.items())}
    return out
