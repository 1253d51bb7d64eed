"""Mixture specs for continual pretraining and the ml-collections config of the LM pipeline.

LongWriter-Zero (arXiv:2506.18841) continual-pretrains on 30B tokens mixed as: zh fiction 40%,
en long-form 30%, zh non-fiction 15%, online information 8%, finance 5%, essays 1%, own long-CoT
samples 1%. Only the first two have local stand-ins here (corpus_zh: classic Chinese novels;
corpus_en: public-domain English books); the rest are named with their weights and a source kind of
None, so a run that lacks them says so instead of silently re-weighting. `lm_config` keeps the
available components and renormalises their weights (40:30 -> 4/7 : 3/7 for the local tiny mix),
listing what it left out in the config's `unavailable_sources`.
"""
from __future__ import annotations

import dataclasses
import os

from data_pipelines.cleaning import DOCUMENT_CHARS
from data_pipelines.lm_pipeline import LMPipelineConfig
from data_pipelines.sources import SourceSpec
from jaxwrite.common import InputError


@dataclasses.dataclass(frozen=True)
class MixtureComponent:
    """One named slice of a mixture; `local_corpus` names a folder under the data dir, if any."""
    name: str
    weight: float
    description: str
    local_corpus: str | None = None


def longwriter_zero_mixture() -> tuple[MixtureComponent, ...]:
    """The LongWriter-Zero continual-pretraining mix (weights sum to 1)."""
    return (
        MixtureComponent("zh_fiction", 0.40, "Chinese fiction", "corpus_zh"),
        MixtureComponent("en_long_form", 0.30, "English long-form writing", "corpus_en"),
        MixtureComponent("zh_non_fiction", 0.15, "Chinese non-fiction"),
        MixtureComponent("online_information", 0.08, "online information"),
        MixtureComponent("finance", 0.05, "finance"),
        MixtureComponent("essays", 0.01, "essays"),
        MixtureComponent("long_cot", 0.01, "own long chain-of-thought samples"),
    )


MIXTURES = {"longwriter_zero": longwriter_zero_mixture}


def lm_config(data_dir: str | None = None, mixture: str = "longwriter_zero", *, seq_len: int = 2048,
              batch_size: int = 8, seed: int = 0, num_epochs: int | None = None,
              max_chars: int = DOCUMENT_CHARS) -> LMPipelineConfig:
    """The LM pipeline's settings for a named mixture, with local corpora under `data_dir` mapped in
    (batch_size: this process's rows; the other settings at LMPipelineConfig's defaults)."""
    if mixture not in MIXTURES:
        raise InputError(f"unknown mixture '{mixture}'; expected one of: {', '.join(sorted(MIXTURES))}")
    components = MIXTURES[mixture]()
    available = [c for c in components
                 if c.local_corpus and data_dir and os.path.isdir(os.path.join(data_dir, c.local_corpus))]
    if not available:
        raise InputError(f"no component of mixture '{mixture}' has local data under {data_dir!r}")
    total = sum(c.weight for c in available)
    return LMPipelineConfig(
        seq_len=seq_len, batch_size=batch_size, seed=seed, num_epochs=num_epochs, mixture=mixture,
        sources={c.name: SourceSpec(kind="corpus_dir", path=os.path.join(data_dir, c.local_corpus),
                                    weight=c.weight / total, max_chars=max_chars) for c in available},
        unavailable_sources={c.name: c.weight for c in components if c not in available})
