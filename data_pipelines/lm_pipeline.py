"""The language-modelling data pipeline: sources -> shard -> shuffle -> tokenise -> mix -> pack -> batch.

Determinism and resumption: every step is a grain dataset, so the stream is a pure function of the
config seed, and `get_state()` / `set_state()` on the returned iterator restores it exactly (the
trainer stores the state beside its Orbax checkpoint). Multi-host: each process reads the documents
`process_index::process_count` of every source, so hosts never see the same document.
"""
from __future__ import annotations

from typing import Mapping, Protocol

import grain
import numpy as np

from data_pipelines.packing import lm_example, pack_and_batch
from data_pipelines.sources import SourceSpec, make_source
from jaxwrite.common import InputError
from jaxwrite.common.settings import MISSING, Settings, setting, settings_class


@settings_class
class LMPipelineConfig(Settings):
    """Settings of `make_lm_pipeline` (`data_pipelines.lm_config` builds them for a named mixture)."""
    seq_len: int = setting(MISSING, "tokens per row", min=1)
    batch_size: int = setting(MISSING, "rows per batch of this process", min=1)
    seed: int = setting(0, "seeds the shuffles and the packing", min=0)
    num_epochs: int | None = setting(None, "passes over every source; None = repeat forever", min=1)
    num_packing_bins: int = setting(8, "rows packed at once (more bins pack tighter, later)", min=1)
    on_long: str = setting("split", "a document longer than seq_len: split it across rows, or error",
                           choices=("split", "error"))
    add_bos: bool = setting(False, "start every document with the tokenizer's BOS token")
    shuffle: bool = setting(True, "shuffle each source's documents every epoch")
    sources: Mapping[str, SourceSpec] = setting(factory=dict, doc="name -> source, mixed by their weights")
    mixture: str = setting("", "the mixture the sources come from (lm_config), for the record")
    unavailable_sources: Mapping[str, float] = setting(factory=dict, doc="the mixture's components with no "
                                                                         "local data: name -> weight, left out")


class TextTokenizer(Protocol):
    """What the pipelines need from a jaxwrite.text tokenizer."""
    eos_ids: tuple[int, ...]
    bos_id: int | None
    pad_id: int

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...


def document_ids(tokenizer: TextTokenizer, text: str, add_bos: bool = False) -> list[int]:
    """One document's token ids, ending with the tokenizer's first EOS id (document boundary)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if add_bos:
        if tokenizer.bos_id is None:
            raise InputError("add_bos is set but the tokenizer has no BOS token", field="add_bos")
        ids = [tokenizer.bos_id] + ids
    return ids + [tokenizer.eos_ids[0]]


def _source_dataset(name: str, spec: SourceSpec, cfg: LMPipelineConfig, index: int,
                    process_index: int, process_count: int) -> grain.MapDataset:
    ds = grain.MapDataset.source(make_source(spec))
    ds = ds[process_index::process_count]
    if len(ds) == 0:
        raise InputError(f"source '{name}' has no documents for process {process_index} of {process_count}",
                         field=f"sources.{name}")
    if cfg.shuffle:
        # A distinct seed per source keeps one source's order independent of the others.
        ds = ds.shuffle(seed=cfg.seed + 1000 * (index + 1))
    # repeat() on a MapDataset reshuffles each epoch when the shuffle sits below it.
    return ds.repeat(cfg.num_epochs)


def make_lm_dataset(cfg: LMPipelineConfig, tokenizer: TextTokenizer, process_index: int = 0,
                    process_count: int = 1) -> grain.IterDataset:
    """The pipeline as a grain IterDataset of batches (see `make_lm_pipeline`)."""
    if not 0 <= process_index < process_count:
        raise InputError(f"process_index {process_index} is outside 0..{process_count - 1}")
    names = sorted(cfg.sources.keys())
    if not names:
        raise InputError("expected at least one entry in sources", field="sources")
    def to_example(doc: dict) -> dict[str, np.ndarray]:
        return lm_example(document_ids(tokenizer, doc["text"], cfg.add_bos))

    streams, weights = [], []
    for i, name in enumerate(names):
        spec = cfg.sources[name]
        ds = _source_dataset(name, spec, cfg, i, process_index, process_count)
        # Whitespace-only documents tokenise to just EOS; they carry nothing to learn and the sources
        # count them (JsonlSource.empty), so dropping them here loses no unreported data.
        streams.append(ds.map(to_example).to_iter_dataset().filter(lambda ex: len(ex["tokens"]) > 0))
        weights.append(spec.weight)
    mixed = streams[0] if len(streams) == 1 else grain.IterDataset.mix(streams, weights)
    return pack_and_batch(mixed, cfg.seq_len, cfg.batch_size, cfg.num_packing_bins, seed=cfg.seed,
                          on_long=cfg.on_long)


def make_lm_pipeline(cfg: LMPipelineConfig, tokenizer: TextTokenizer, process_index: int = 0,
                     process_count: int = 1) -> grain.DatasetIterator:
    """Iterator of batches {tokens, targets, loss_mask, segment_ids, positions}: [batch_size, seq_len] int32.

    The iterator has `get_state()` (a JSON-serialisable dict) and `set_state(state)` for exact resume.
    """
    return iter(make_lm_dataset(cfg, tokenizer, process_index, process_count))

