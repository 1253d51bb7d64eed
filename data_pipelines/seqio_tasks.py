"""seqio Tasks and a Mixture for the local corpora (optional extra: `pip install jaxwrite[seqio]`).

Importing this module needs seqio and TensorFlow; the rest of data_pipelines does not. The tasks read
the same cleaned documents as the grain pipeline (data_pipelines.cleaning) and the mixture uses the
same LongWriter-Zero weights (data_pipelines.mixtures), so a T5X/seqio user gets the same data.

    register_tasks(data_dir="/data", spm_path="tokenizer.model")
    seqio.get_mixture_or_task("jaxwrite_longwriter_zero_local").get_dataset({"targets": 2048}, "train")
"""
from __future__ import annotations

import functools
import os

import seqio
import tensorflow as tf

from data_pipelines.cleaning import DOCUMENT_CHARS
from data_pipelines.mixtures import longwriter_zero_mixture
from data_pipelines.sources import TextFilesSource, corpus_files

MIXTURE_NAME = "jaxwrite_longwriter_zero_local"


def _corpus_dataset(split: str, shuffle_files: bool, seed: int | None = None, *, corpus_dir: str,
                    max_chars: int) -> tf.data.Dataset:
    del split, shuffle_files, seed  # one split; seqio shuffles examples itself
    source = TextFilesSource(corpus_files(corpus_dir), max_chars)
    texts = [source[i]["text"] for i in range(len(source))]
    return tf.data.Dataset.from_tensor_slices({"text": texts})


def task_name(component: str) -> str:
    return f"jaxwrite_{component}"


def register_tasks(data_dir: str, spm_path: str, max_chars: int = DOCUMENT_CHARS) -> list[str]:
    """Registers one LM task per mixture component with local data, plus the mixture; returns the task names."""
    vocab = seqio.SentencePieceVocabulary(spm_path)
    features = {"targets": seqio.Feature(vocabulary=vocab, add_eos=True)}
    tasks, weights = [], []
    for comp in longwriter_zero_mixture():
        corpus_dir = os.path.join(data_dir, comp.local_corpus) if comp.local_corpus else None
        if corpus_dir is None or not os.path.isdir(corpus_dir):
            continue
        name = task_name(comp.name)
        if name not in seqio.TaskRegistry.names():
            seqio.TaskRegistry.add(
                name,
                source=seqio.FunctionDataSource(
                    functools.partial(_corpus_dataset, corpus_dir=corpus_dir, max_chars=max_chars),
                    splits=["train"]),
                preprocessors=[
                    functools.partial(seqio.preprocessors.rekey, key_map={"targets": "text"}),
                    seqio.preprocessors.tokenize,
                    seqio.preprocessors.append_eos_after_trim,
                ],
                output_features=features)
        tasks.append(name)
        weights.append(comp.weight)
    if tasks and MIXTURE_NAME not in seqio.MixtureRegistry.names():
        seqio.MixtureRegistry.add(MIXTURE_NAME, list(zip(tasks, weights)))
    return tasks
