"""TFDS builders (array_record files, no TensorFlow needed) for the local corpora, WritingBench and
WritingPreferenceBench pairs.

Each builder reads the shared data folder given as `source_dir` and writes array_record shards under
`data_dir`; `builder.as_data_source()[split]` reads them back as a random-access source for grain.
Text features come back as UTF-8 bytes: `decode_record` turns them into str. The WritingBench
checklist is stored as its JSON text (`checklist_json`) so the criteria keep their key order, which
the critic prompt's `str(dict)` rendering depends on.

    builder = WritingBenchBuilder(source_dir=".../writingbench", data_dir="/tmp/tfds")
    builder.download_and_prepare(file_format="array_record")  # or pass file_format to the constructor
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
from etils import epath
import tensorflow_datasets as tfds

from data_pipelines.cleaning import DOCUMENT_CHARS
from data_pipelines.preferences import POOL_PATH, load_scored_responses, make_pairs, split_by_prompt
from data_pipelines.sources import TextFilesSource, corpus_files
from jaxwrite.common import read_jsonl

_TEXT = tfds.features.Text


class _SourceDirBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Builder reading its input from a local folder (`source_dir`) instead of downloading."""

    def __init__(self, *, source_dir: str, file_format: str = "array_record", **kwargs: Any):
        self._source_dir = os.fspath(source_dir)
        super().__init__(file_format=file_format, **kwargs)

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        # tfds' default probes package resources through the optional `importlib_resources`
        # backport; the builder's own file is all it needs (to look for a checksums file).
        return epath.Path(sys.modules[cls.__module__].__file__)


class CorpusConfig(tfds.core.BuilderConfig):
    def __init__(self, *, max_chars: int = DOCUMENT_CHARS, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_chars = max_chars


class LocalCorpus(_SourceDirBuilder):
    """Cleaned Gutenberg books split into documents (see data_pipelines.cleaning); one `train` split.

    source_dir = a corpus folder with pg*.txt (corpus_en or corpus_zh).
    """

    VERSION = tfds.core.Version("1.0.0")
    BUILDER_CONFIGS = [CorpusConfig(name="en", description="corpus_en"),
                       CorpusConfig(name="zh", description="corpus_zh")]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
            {"id": _TEXT(), "text": _TEXT()}))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        source = TextFilesSource(corpus_files(self._source_dir), self.builder_config.max_chars)
        for i in range(len(source)):
            doc = source[i]
            yield doc["id"], doc


class WritingBench(_SourceDirBuilder):
    """The 1,000 WritingBench queries (`test` split); source_dir = the writingbench folder."""

    VERSION = tfds.core.Version("2.0.0")

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "index": np.int32, "domain1": _TEXT(), "domain2": _TEXT(), "lang": _TEXT(),
            "query": _TEXT(), "checklist_json": _TEXT()}))

    def _split_generators(self, dl_manager):
        return {"test": self._generate_examples()}

    def _generate_examples(self):
        path = os.path.join(self._source_dir, "benchmark_all.jsonl")
        fields = ("index", "domain1", "domain2", "lang", "query", "checklist")
        for _, rec in read_jsonl(path, required=fields):
            yield rec["index"], {
                "index": rec["index"], "domain1": rec["domain1"], "domain2": rec["domain2"],
                "lang": rec["lang"], "query": rec["query"],
                "checklist_json": json.dumps(rec["checklist"], ensure_ascii=False)}


class PairsConfig(tfds.core.BuilderConfig):
    def __init__(self, *, min_delta: float = 1.0, eval_fraction: float = 0.1, seed: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        self.min_delta, self.eval_fraction, self.seed = min_delta, eval_fraction, seed


class WritingPreferencePairs(_SourceDirBuilder):
    """Preference pairs (Δ mean human score ≥ 1), split train/eval by prompt; source_dir = the data root."""

    VERSION = tfds.core.Version("1.0.0")
    BUILDER_CONFIGS = [PairsConfig(name="delta1_eval10_seed0", description="Δ ≥ 1, 10% of prompts to eval")]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "question_id": _TEXT(), "prompt": _TEXT(), "chosen": _TEXT(), "rejected": _TEXT(),
            "chosen_score": np.float32, "rejected_score": np.float32,
            "chosen_model": _TEXT(), "rejected_model": _TEXT()}))

    def _split_generators(self, dl_manager):
        cfg = self.builder_config
        pairs = make_pairs(load_scored_responses(os.path.join(self._source_dir, POOL_PATH)), cfg.min_delta)
        train, evaluation = split_by_prompt(pairs, cfg.eval_fraction, cfg.seed)
        return {"train": self._generate_examples(train), "eval": self._generate_examples(evaluation)}

    def _generate_examples(self, pairs):
        for i, pair in enumerate(pairs):
            yield i, pair.to_dict()


def decode_record(record: dict[str, Any]) -> dict[str, Any]:
    """Bytes -> str for text features of a record read from an array_record data source."""
    return {k: v.decode("utf-8") if isinstance(v, bytes) else v for k, v in record.items()}
