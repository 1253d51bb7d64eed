"""Dataset definitions feeding jaxwrite's trainer: corpus cleaning, document sources, grain LM pipelines
with packing and mixtures, chat SFT data (critic / writer) with a benchmark-contamination guard,
preference pairs, and TFDS builders. seqio tasks live in `data_pipelines.seqio_tasks` (optional extra).

Imports only jaxwrite.common, jaxwrite.text and jaxwrite.prompts (the official critic prompts).
"""
from data_pipelines.chat_sft import (
    chat_example,
    critic_sft_conversations,
    critic_sft_examples,
    read_critic_records,
    sft_dataset,
    writer_sft_examples,
)
from data_pipelines.critic_verdicts import (
    build_critic_data,
    check_verdict,
    read_verdicts,
    split_by_query,
    verdicts_from_critic_scores,
)
from data_pipelines.cleaning import CleaningReport, clean_files, clean_text, split_documents
from data_pipelines.contamination import ContaminationGuard, guard_records
from data_pipelines.degraded_pairs import DegradedPair, build_degraded_pairs, swap_labels
from data_pipelines.lm_pipeline import LMPipelineConfig, document_ids, make_lm_dataset, make_lm_pipeline
from data_pipelines.mixtures import MixtureComponent, lm_config, longwriter_zero_mixture
from data_pipelines.packing import lm_example, masked_example, pack_and_batch, pad_and_batch
from data_pipelines.preferences import (
    PreferencePair,
    TruncationCounts,
    cap_per_prompt,
    length_baseline_accuracy,
    load_scored_responses,
    make_pairs,
    read_pairs,
    split_by_prompt,
    tokenize_pair,
)
from data_pipelines.sources import (ArrayRecordSource, JsonlSource, SourceSpec, TextFilesSource, corpus_files,
                                    make_source, write_array_record)

__all__ = [
    "ArrayRecordSource", "CleaningReport", "cap_per_prompt", "build_critic_data", "check_verdict", "read_verdicts",
    "split_by_query", "verdicts_from_critic_scores", "ContaminationGuard", "DegradedPair", "JsonlSource",
    "MixtureComponent", "PreferencePair", "TextFilesSource", "TruncationCounts", "build_degraded_pairs", "chat_example",
    "clean_files", "clean_text", "corpus_files", "critic_sft_conversations", "critic_sft_examples",
    "document_ids",
    "guard_records", "length_baseline_accuracy", "lm_config", "lm_example",
    "load_scored_responses", "longwriter_zero_mixture", "make_lm_dataset", "make_lm_pipeline", "make_pairs",
    "masked_example", "pack_and_batch", "pad_and_batch", "read_critic_records", "read_pairs", "sft_dataset",
    "split_by_prompt", "split_documents", "swap_labels", "tokenize_pair", "write_array_record", "writer_sft_examples",
    "LMPipelineConfig", "SourceSpec", "make_source",
]
