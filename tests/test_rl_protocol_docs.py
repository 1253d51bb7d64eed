"""Think/answer documents for the pretraining mix, and how extra sources join the LM mixture."""
import json

import pytest

from data_pipelines import LMPipelineConfig, SourceSpec
from jaxwrite.common import InputError, load_config
from jaxwrite.text import count_words, parse_think_answer
from jaxwrite.train import TrainConfig
from jaxwrite.train.batches import _add_extra_sources
from jaxwrite.rl.protocol_docs import write_protocol_chat_records, write_protocol_docs
from train_fixtures import write_corpus


def test_protocol_docs_follow_the_base_prompt_protocol(tmp_path):
    write_corpus(tmp_path)
    out = tmp_path / "docs.jsonl"
    counts = write_protocol_docs(str(tmp_path), str(out), count=5, min_words=10, max_words=60, seed=0)
    assert counts["documents"] == 5
    first = [json.loads(line)["text"] for line in out.read_text().splitlines()]
    again = tmp_path / "again.jsonl"
    write_protocol_docs(str(tmp_path), str(again), count=5, min_words=10, max_words=60, seed=0)
    assert [json.loads(line)["text"] for line in again.read_text().splitlines()] == first   # deterministic
    for text in first:
        completion = text.split("Assistant: ", 1)[1]
        parsed = parse_think_answer(completion)
        assert parsed.well_formed and 10 <= count_words(parsed.answer) <= 60


def test_protocol_chat_records_teach_the_chat_rollout_prompt(tmp_path, smollm2_gguf):
    """Each record's query is the protocol user turn a "chat" rollout renders, with no length asked (GRPO
    teaches length); rendered by a real chat template, the SFT prompt is token for token the rollout prompt."""
    from data_pipelines.chat_sft import writer_sft_examples
    from jaxwrite.rl.rollout import prompt_ids
    from jaxwrite.text import load_tokenizer, think_answer_user_turn

    write_corpus(tmp_path)
    out = tmp_path / "records.jsonl"
    assert write_protocol_chat_records(str(tmp_path), str(out), count=4, min_words=10, max_words=60,
                                       seed=1)["records"] == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    again = tmp_path / "again.jsonl"
    write_protocol_chat_records(str(tmp_path), str(again), count=4, min_words=10, max_words=60, seed=1)
    assert again.read_text() == out.read_text()
    tok = load_tokenizer(smollm2_gguf)
    examples, _ = writer_sft_examples(str(out), tok, guard=None)
    for row, example in zip(rows, examples):
        task = row["query"].rsplit("\n", 1)[1]
        assert row["query"] == think_answer_user_turn(task) and not any(ch.isdigit() for ch in task)
        parsed = parse_think_answer(row["response"])
        assert parsed.well_formed and 10 <= count_words(parsed.answer) <= 60
        rollout = prompt_ids(tok, task, "chat", "en")
        ids = [int(i) for i in example["tokens"]]
        assert ids[:len(rollout)] == rollout
        # Targets are shifted by one: the prompt's last token predicts the first trained one.
        mask = example["loss_mask"]
        assert mask[:len(rollout) - 1].sum() == 0 and mask[len(rollout) - 1] == 1


def test_extra_sources_take_their_share_of_the_mix():
    mix = LMPipelineConfig(seq_len=8, batch_size=1, sources={"en": {"kind": "corpus_dir", "weight": 0.6},
                                                             "zh": {"kind": "corpus_dir", "weight": 0.4}})
    extra = {"long_cot": SourceSpec(kind="jsonl", path="x.jsonl", weight=0.25)}
    weights = {name: spec.weight for name, spec in _add_extra_sources(mix, extra).sources.items()}
    assert weights == pytest.approx({"en": 0.45, "zh": 0.3, "long_cot": 0.25})
    recipe = load_config("cpt_tiny")
    recipe.data.extra_sources["all"] = {"kind": "jsonl", "path": "x", "weight": 1.0}
    with pytest.raises(InputError, match=r"field 'data\.extra_sources': .*expected a share in \(0, 1\)"):
        TrainConfig.from_recipe(recipe)   # refused at load
