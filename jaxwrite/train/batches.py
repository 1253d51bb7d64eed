"""Batch sources, chosen by an objective: a training stream with checkpointable state, plus eval batches.

Every source yields host-local numpy batches (this process's share of the global batch) and exposes the
grain iterator state, which the trainer stores in each checkpoint for exact resume. Eval batches are
rebuilt from the same seed every time, so eval numbers are comparable across steps and resumes.
"""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator

import grain
import jax
import numpy as np

import data_pipelines as dp
from jaxwrite.common import InputError, Registry
from jaxwrite.text import Tokenizer
from jaxwrite.train.data_config import DegradedPairData, LMCorpusData, PreferencePoolData
from jaxwrite.train.tokenizer_setup import resolve_data_dir

if TYPE_CHECKING:
    from jaxwrite.train.config import TrainConfig

Batch = dict[str, np.ndarray]


@dataclasses.dataclass
class BatchSource:
    train: grain.DatasetIterator                    # infinite; get_state()/set_state() for resume
    make_eval: Callable[[], Iterator[Batch]] | None  # fresh, deterministic eval batches each call
    info: dict[str, Any]                            # data counts worth logging (drops, splits, baselines)
    # Metrics the source produced since the last call (e.g. GRPO rollout rewards), merged into the log.
    drain_metrics: Callable[[], list[dict[str, float]]] | None = None
    # (label, metrics key) pairs the progress bar shows beside the loss when a record has them.
    progress: tuple[tuple[str, str], ...] = ()
    # Called when the run ends (e.g. stops a rollout thread); None = nothing to release.
    close: Callable[[], None] | None = None


BATCH_SOURCES: Registry[Callable[["TrainConfig", Tokenizer], BatchSource]] = Registry("batch source")


def local_batch_size(config: "TrainConfig") -> int:
    """This process's rows of the global `data.batch_size`."""
    global_bs, procs = config.data.batch_size, jax.process_count()
    if global_bs % procs:
        raise InputError(f"batch_size {global_bs} is not divisible by {procs} processes", field="data.batch_size")
    return global_bs // procs


def _limited(it: Iterator[Batch], count: int) -> Iterator[Batch]:
    for i, batch in enumerate(it):
        if count and i >= count:
            return
        yield batch


def _padded(it: Iterator[Batch], rows: int) -> Iterator[Batch]:
    """Eval batches with a short last batch filled up to `rows` with empty rows (segment 0, loss_mask 0,
    so they add no loss tokens): the eval step keeps one compiled shape, and an eval file smaller than
    one batch is evaluated instead of yielding no batch (and no eval metrics) at all."""
    for batch in it:
        short = rows - len(batch["tokens"])
        if short > 0:
            batch = {k: np.concatenate([v, np.zeros((short,) + v.shape[1:], v.dtype)]) for k, v in batch.items()}
        yield batch


# --- continual pretraining: packed text from the local corpora mixture ----------------------------
def _split_sources(lm_cfg: dp.LMPipelineConfig, data_dir: str, holdout: tuple[str, ...], max_chars: int):
    """Train sources without the held-out books, and an eval source made of exactly those books."""
    held = {os.path.abspath(os.path.join(data_dir, h)) for h in holdout}
    for h in held:
        if not os.path.isfile(h):
            raise InputError("held-out file not found", path=h, field="data.eval_holdout")
    sources, used = {}, set()
    for name, spec in lm_cfg.sources.items():
        if spec.kind == "corpus_dir":
            files = [f for f in dp.corpus_files(spec.path) if os.path.abspath(f) not in held]
            used.update(os.path.abspath(f) for f in dp.corpus_files(spec.path) if os.path.abspath(f) in held)
            spec = spec.replace(kind="text_files", paths=tuple(files))
        sources[name] = spec
    unused = held - used
    if unused:
        raise InputError("held-out file is not part of any training source", path=sorted(unused)[0],
                         field="data.eval_holdout")
    evals = None
    if held:
        evals = lm_cfg.replace(sources={"holdout": dp.SourceSpec(kind="text_files", paths=tuple(sorted(held)),
                                                                 weight=1.0, max_chars=max_chars)})
    return lm_cfg.replace(sources=sources), evals


def _add_extra_sources(train_cfg: dp.LMPipelineConfig, extra) -> dp.LMPipelineConfig:
    """Adds `data.extra_sources` (name -> SourceSpec) to the training mix: their weights are shares of the
    whole mix (checked in (0, 1) at load) and the corpora are scaled down to the rest."""
    if not extra:
        return train_cfg
    share = sum(spec.weight for spec in extra.values())
    scaled = {name: spec.replace(weight=spec.weight * (1.0 - share)) for name, spec in train_cfg.sources.items()}
    return train_cfg.replace(sources={**scaled, **extra})


@BATCH_SOURCES.register("lm_corpus")
def lm_corpus_source(config: "TrainConfig", tokenizer: Tokenizer) -> BatchSource:
    data: LMCorpusData = config.data
    lm_cfg = dp.lm_config(resolve_data_dir(config), data.mixture, seq_len=data.seq_len,
                          batch_size=local_batch_size(config), seed=config.seed, max_chars=data.max_chars)
    train_cfg, eval_cfg = _split_sources(lm_cfg, resolve_data_dir(config), data.eval_holdout, data.max_chars)
    train_cfg = _add_extra_sources(train_cfg, data.extra_sources)
    proc = (jax.process_index(), jax.process_count())
    train = dp.make_lm_pipeline(train_cfg, tokenizer, *proc)
    make_eval = None
    if eval_cfg is not None:
        # Each process reads its own share of the held-out documents.
        make_eval = lambda: _limited(dp.make_lm_pipeline(eval_cfg, tokenizer, *proc),  # noqa: E731
                                     data.eval_batches)
    info = {"unavailable_sources": dict(lm_cfg.unavailable_sources),
            "weights": {n: s.weight for n, s in train_cfg.sources.items()}}
    return BatchSource(train, make_eval, info)


# --- chat SFT: critic verdicts or writer responses, loss on the assistant turn only ---------------
def _sft_source(config: "TrainConfig", tokenizer: Tokenizer, build) -> BatchSource:
    data = config.data
    if not data.train_path:
        raise InputError("expected a jsonl file of training records (--config.data.train_path=...)",
                         field="data.train_path")
    data_dir = resolve_data_dir(config)
    guard = None
    if data.benchmark_path:
        guard = dp.ContaminationGuard.from_writingbench(os.path.join(data_dir, data.benchmark_path))
    examples, stats = build(data.train_path, guard)
    if not examples:
        raise InputError("no training examples left", path=data.train_path, field="data.train_path")
    bs, seed = local_batch_size(config), config.seed

    def dataset(exs, epochs, drop_remainder=True):
        return dp.sft_dataset(exs, data.seq_len, bs, seed=seed, num_epochs=epochs, pack=data.pack,
                              pad_id=tokenizer.pad_id, on_long=data.on_long, drop_remainder=drop_remainder)

    proc = slice(jax.process_index(), None, jax.process_count())
    train = iter(dataset(examples[proc], None))
    make_eval = None
    if data.eval_path:
        eval_examples, eval_stats = build(data.eval_path, guard)
        stats = {**stats, "eval": eval_stats}
        if not eval_examples:
            raise InputError("no eval examples left", path=data.eval_path, field="data.eval_path")
        make_eval = lambda: _limited(_padded(iter(dataset(eval_examples[proc], 1, False)), bs),  # noqa: E731
                                     data.eval_batches)
    return BatchSource(train, make_eval, stats)


@BATCH_SOURCES.register("critic_sft")
def critic_sft_source(config: "TrainConfig", tokenizer: Tokenizer) -> BatchSource:
    data = config.data
    return _sft_source(config, tokenizer, lambda path, guard: dp.critic_sft_examples(
        path, tokenizer, guard, data.on_overlap, data.allow_overlap))


@BATCH_SOURCES.register("writer_sft")
def writer_sft_source(config: "TrainConfig", tokenizer: Tokenizer) -> BatchSource:
    data = config.data
    return _sft_source(config, tokenizer, lambda path, guard: dp.writer_sft_examples(
        path, tokenizer, guard, data.on_overlap, data.allow_overlap))


# --- Bradley–Terry pairs: WritingPreferenceBench pool (split by prompt) or degraded corpus passages ---
def _tokenized_pairs(pairs, tokenizer, seq_len: int, truncation: str) -> tuple[list[Batch], dict]:
    counts = dp.TruncationCounts()
    rows = [r for r in (dp.tokenize_pair(tokenizer, p, seq_len, truncation, counts) for p in pairs)
            if r is not None]
    return rows, {"pairs": len(pairs), "truncated": counts.truncated, "dropped": counts.dropped}


def _pair_splits(config: "TrainConfig") -> tuple[list, list, dict]:
    """(train, eval, info) pairs of the data section's kind: "wpb_pool" (WritingPreferenceBench, split by
    prompt) or "degraded_corpus" (synthetic original-vs-degraded corpus passages, split by book)."""
    data, seed = config.data, config.seed
    if isinstance(data, PreferencePoolData):
        groups = dp.load_scored_responses(os.path.join(resolve_data_dir(config), data.pool_path))
        train, evaluation = dp.split_by_prompt(dp.make_pairs(groups, data.min_delta), data.eval_fraction, seed)
        return train, evaluation, {"pairs_kind": data.kind}
    if isinstance(data, DegradedPairData):
        chars = {"en": data.passage_chars_en, "zh": data.passage_chars_zh}
        train, evaluation, stats = dp.build_degraded_pairs(
            resolve_data_dir(config), data.corpora, data.degradations, data.passages_per_book,
            data.eval_fraction, seed, chars)
        swap = data.train_label_swap
        if swap:   # the control run: labels that carry (at 0.5) no information about the text
            train = dp.swap_labels(train, swap, seed)
        # Labelled synthetic in data_info.json, so no report mistakes it for human preferences.
        return train, evaluation, {"pairs_kind": data.kind, "synthetic": True, "train_label_swap": swap,
                                   "degraded_pairs": stats}
    raise InputError(f"expected preference pairs (wpb_pool or degraded_corpus), got {data.kind!r}",
                     field="data.kind")


def preference_splits(config: "TrainConfig") -> tuple[list, list, dict]:
    """(train, eval, info): the pairs a bradley_terry recipe trains and evaluates on, after the seeded
    max_train_pairs / max_eval_pairs samples (also what jaxwrite.train.rm_eval scores a checkpoint on)."""
    data = config.data
    train_pairs, eval_pairs, pair_info = _pair_splits(config)
    rng = np.random.default_rng(config.seed)
    if data.max_train_pairs and len(train_pairs) > data.max_train_pairs:
        train_pairs = [train_pairs[i] for i in sorted(rng.choice(len(train_pairs), data.max_train_pairs, False))]
    if data.max_eval_pairs and len(eval_pairs) > data.max_eval_pairs:
        eval_pairs = [eval_pairs[i] for i in sorted(rng.choice(len(eval_pairs), data.max_eval_pairs, False))]
    return train_pairs, eval_pairs, pair_info


@BATCH_SOURCES.register("preference_pairs")
def preference_pairs_source(config: "TrainConfig", tokenizer: Tokenizer) -> BatchSource:
    data = config.data
    train_pairs, eval_pairs, pair_info = preference_splits(config)
    seq_len, bs = data.seq_len, local_batch_size(config)
    train_rows, train_stats = _tokenized_pairs(train_pairs, tokenizer, seq_len, data.truncation)
    eval_rows, eval_stats = _tokenized_pairs(eval_pairs, tokenizer, seq_len, data.truncation)
    for name, rows, stats in (("training", train_rows, train_stats), ("eval", eval_rows, eval_stats)):
        if len(rows) < bs:
            raise InputError(f"{len(rows)} {name} pairs left after tokenisation ({stats['dropped']} of "
                             f"{stats['pairs']} dropped: prompt longer than seq_len {seq_len}); expected at "
                             f"least one batch of {bs}", field="data.seq_len")
    proc = slice(jax.process_index(), None, jax.process_count())
    train = iter(grain.MapDataset.source(train_rows[proc]).shuffle(seed=config.seed).repeat(None)
                 .to_iter_dataset().batch(bs, drop_remainder=True))
    make_eval = lambda: _limited(iter(grain.MapDataset.source(eval_rows[proc]).to_iter_dataset()  # noqa: E731
                                      .batch(bs, drop_remainder=True)), data.eval_batches)
    info = {**pair_info, "train": train_stats, "eval": eval_stats,
            "eval_length_baseline_accuracy_chars": dp.length_baseline_accuracy(eval_pairs)}
    return BatchSource(train, make_eval, info)
