"""The recipe's `data` section, one frozen class per kind of data, chosen by `data.kind`.

Each objective names the kinds its batch source reads (`Objective.data_kinds`; the first is taken when
a recipe's section names none), so a section of another kind, a misspelt key or a mistyped value is
refused at load with its `data.FIELD`. The builders in jaxwrite.train.defaults (`lm_data`, `sft_data`,
`preference_data`, `degraded_pair_data`) give recipes these classes' defaults as ml-collections groups.
"""
from __future__ import annotations

from typing import Mapping

from data_pipelines.cleaning import DOCUMENT_CHARS
from data_pipelines.degraded_pairs import DEFAULT_PASSAGE_CHARS, KINDS as DEGRADATIONS
from data_pipelines.mixtures import MIXTURES
from data_pipelines.preferences import POOL_PATH
from data_pipelines.sources import SourceSpec
from jaxwrite.common import InputError, Registry
from jaxwrite.common.settings import MISSING, Settings, setting, settings_class

DATA_KINDS: Registry[type["DataConfig"]] = Registry("data kind")
TRUNCATIONS = ("response", "drop", "error")
KIND_DOC = "which data, a name of DATA_KINDS: lm_corpus, chat_sft, wpb_pool or degraded_corpus"


@settings_class
class DataConfig(Settings):
    """What every kind of training data has."""
    SECTION = "data"

    kind: str = setting("", KIND_DOC)
    seq_len: int = setting(MISSING, "tokens per row", min=1)
    batch_size: int = setting(MISSING, "global batch per optimiser step: rows (pairs for preference data), "
                                       "split into grad_accum_steps microbatches", min=1)
    eval_batches: int = setting(0, "eval batches per evaluation; 0 = all of the eval data", min=0)

    def __post_init__(self):
        super().__post_init__()
        if self.kind not in DATA_KINDS or DATA_KINDS.get(self.kind) is not type(self):
            raise InputError(f"{type(self).__name__} is data of another kind than {self.kind!r}", field="data.kind")

    @classmethod
    def from_mapping(cls, values):
        """The class of `values["kind"]` built from `values` (on the base class; a subclass builds itself)."""
        if cls is not DataConfig:
            return super().from_mapping(values)
        kind = values.get("kind")
        if kind not in DATA_KINDS:
            raise InputError(f"unknown data kind {kind!r}; expected one of: {', '.join(DATA_KINDS.names())}",
                             field="data.kind")
        return DATA_KINDS.get(kind).from_mapping(values)

    def data_needs(self) -> tuple[str, ...]:
        """Paths under the data dir this section reads (jaxwrite.train.tokenizer_setup.run_data_needs)."""
        return ()


def data_kind(cls):
    """Registers a DataConfig subclass under the default of its `kind` field."""
    return DATA_KINDS.register(cls.__dataclass_fields__["kind"].default)(cls)


@data_kind
@settings_class
class LMCorpusData(DataConfig):
    """Continual pretraining: packed text of the local corpora mixture (data_pipelines.lm_config)."""
    kind: str = setting("lm_corpus", KIND_DOC)
    mixture: str = setting("longwriter_zero", "the mixture's name (data_pipelines.MIXTURES); its components with "
                                              "local data are renormalised", choices=MIXTURES)
    max_chars: int = setting(DOCUMENT_CHARS, "characters per document; longer books are cut into documents "
                                             "this long", min=1)
    eval_holdout: tuple[str, ...] = setting(("corpus_en/pg11.txt", "corpus_zh/pg27166.txt"),
                                            "books (under the data dir) kept out of training, the eval data")
    eval_batches: int = setting(4, "eval batches per evaluation; 0 = all of the held-out books", min=0)
    extra_sources: Mapping[str, SourceSpec] = setting(
        factory=dict, doc="more training sources beside the corpora, name -> {kind, path, weight, ...} "
                          "(data_pipelines.SourceSpec); their weights are shares of the whole mix, e.g. GRPO's "
                          "think/answer documents (rl/protocol_docs.py)")

    def __post_init__(self):
        super().__post_init__()
        share = sum(spec.weight for spec in self.extra_sources.values())
        if self.extra_sources and not 0 < share < 1:
            raise InputError(f"extra source weights sum to {share}; expected a share in (0, 1)",
                             field="data.extra_sources")

    def data_needs(self) -> tuple[str, ...]:
        return self.eval_holdout


@data_kind
@settings_class
class ChatSFTData(DataConfig):
    """Chat SFT (critic verdicts or writer responses), loss on the assistant turn only."""
    kind: str = setting("chat_sft", KIND_DOC)
    train_path: str = setting("", "jsonl of training records (required: --config.data.train_path=FILE)")
    eval_path: str = setting("", "jsonl of eval records; empty = no eval")
    pack: bool = setting(True, "pack several records per row; false = one record per row")
    on_long: str = setting("error", "a record longer than seq_len: error, or split it across rows",
                           choices=("error", "split"))
    benchmark_path: str = setting("writingbench/benchmark_all.jsonl",
                                  "contamination guard: records whose query overlaps a query of this file "
                                  "(under the data dir) are refused; empty = no guard")
    on_overlap: str = setting("error", "an overlapping record: error, or drop it (and count it)",
                              choices=("error", "drop"))
    allow_overlap: bool = setting(False, "keep overlapping records (as WritingBench's own critic did)")
    num_records: int = setting(0, "records in train_path, for recipes that derive num_steps from epochs "
                                  "(jaxwrite.train.defaults.steps_from_epochs); 0 = not used", min=0)

    def data_needs(self) -> tuple[str, ...]:
        return (self.benchmark_path,) if self.benchmark_path else ()


@settings_class
class PairData(DataConfig):
    """What both kinds of Bradley–Terry pairs have."""
    eval_fraction: float = setting(0.1, "share held out for eval (of prompts, or of books)", min=0, max=1)
    truncation: str = setting("response", "a pair longer than seq_len: cut the response's tail, drop the pair, "
                                          "or error", choices=TRUNCATIONS)
    max_train_pairs: int = setting(0, "a seeded sample of this many training pairs; 0 = all", min=0)
    max_eval_pairs: int = setting(0, "a seeded sample of this many eval pairs; 0 = all", min=0)


@data_kind
@settings_class
class PreferencePoolData(PairData):
    """WritingPreferenceBench responses with human scores, paired and split by prompt."""
    kind: str = setting("wpb_pool", KIND_DOC)
    pool_path: str = setting(POOL_PATH, "the scored-response pool (under the data dir)")
    min_delta: float = setting(1.0, "pair two responses whose mean human scores differ by at least this", min=0)

    def data_needs(self) -> tuple[str, ...]:
        return (self.pool_path,) if self.pool_path else ()


@data_kind
@settings_class
class DegradedPairData(PairData):
    """SYNTHETIC pairs (data_pipelines.degraded_pairs): a corpus passage against a degraded copy, split by book."""
    kind: str = setting("degraded_corpus", KIND_DOC)
    corpora: tuple[str, ...] = setting(("corpus_en", "corpus_zh"), "corpus folders (under the data dir)")
    degradations: tuple[str, ...] = setting(DEGRADATIONS, "how the rejected copy is degraded", choices=DEGRADATIONS)
    passages_per_book: int = setting(200, "passages cut from each book", min=1)
    # Short enough that original and degraded copy fit seq_len untruncated.
    passage_chars_en: tuple[int, int] = setting(DEFAULT_PASSAGE_CHARS["en"], "(min, max) characters of an "
                                                                             "English passage", min=1)
    passage_chars_zh: tuple[int, int] = setting(DEFAULT_PASSAGE_CHARS["zh"], "(min, max) characters of a "
                                                                             "Chinese passage", min=1)
    eval_fraction: float = setting(0.2, "share of each corpus's books held out for eval", min=0, max=1)
    train_label_swap: float = setting(0.0, "control run: share of training labels swapped at random (0.5 = "
                                           "labels that carry no information)", min=0, max=1)

    def data_needs(self) -> tuple[str, ...]:
        return self.corpora
