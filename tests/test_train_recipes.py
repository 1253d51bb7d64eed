"""The critic-SFT and reward-model recipes run end to end on tiny shapes with the shared data."""
import json

import pytest

from jaxwrite.common import InputError, load_config
from jaxwrite.train import train
from train_fixtures import REPO, train_tokenizer, write_corpus

FAST = {"model.num_layers": 1, "progress_bar": False, "peak_flops_per_device": 1e12, "log_every": 1}


def _overrides(**values):
    return [f"--config.{k}={v}" for k, v in {**FAST, **values}.items()]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipes")
    return train_tokenizer(write_corpus(root / "data"), root / "tok")


def _critic_records(path, queries):
    criterion = {"name": "Clarity", "criteria_description": "Is it clear?", "1-2": "no", "3-4": "a bit",
                 "5-6": "fair", "7-8": "good", "9-10": "very"}
    with open(path, "w", encoding="utf-8") as f:
        for i, q in enumerate(queries):
            f.write(json.dumps({"query": q, "response": f"The captain wrote letter {i}.", "criterion": criterion,
                                "score": 1 + i % 10, "reason": "short and plain"}) + "\n")


def test_critic_sft_trains_and_evaluates(data_dir, tokenizer_dir, tmp_path):
    train_file, eval_file = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    _critic_records(train_file, [f"Write a note about the old house number {i}." for i in range(12)])
    _critic_records(eval_file, [f"Describe the quiet river at morning, part {i}." for i in range(8)])
    config = load_config(str(REPO / "configs" / "critic_sft_tiny.py"), _overrides(
        data_dir=data_dir, **{"tokenizer.path": tokenizer_dir, "data.train_path": train_file,
                              "data.eval_path": eval_file, "data.seq_len": 256, "num_steps": 3,
                              "eval_every": 3, "data.eval_batches": 1}))
    assert train(config, str(tmp_path / "run")) == 0
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3]
    assert {"tokens_per_sec", "mfu", "lr", "grad_norm"} <= set(records[1])
    assert [r["step"] for r in records if "eval/loss" in r] == [0, 3]   # starting point and end


def test_critic_sft_refuses_benchmark_queries(data_dir, tokenizer_dir, tmp_path):
    benchmark_query = json.loads(open(data_dir / "writingbench" / "benchmark_all.jsonl").readline())["query"]
    train_file = tmp_path / "train.jsonl"
    _critic_records(train_file, ["An unrelated request about gardens.", benchmark_query])
    config = load_config(str(REPO / "configs" / "critic_sft_tiny.py"), _overrides(
        data_dir=data_dir, **{"tokenizer.path": tokenizer_dir, "data.train_path": train_file, "num_steps": 1}))
    with pytest.raises(InputError, match=str(train_file)):
        train(config, str(tmp_path / "run"))


def test_reward_model_reports_accuracy_beside_length_baseline(data_dir, tokenizer_dir, tmp_path):
    config = load_config(str(REPO / "configs" / "rm_tiny.py"), _overrides(
        data_dir=data_dir, **{"tokenizer.path": tokenizer_dir, "data.seq_len": 512, "data.max_train_pairs": 32,
                              "data.max_eval_pairs": 16, "num_steps": 2, "eval_every": 2}))
    assert train(config, str(tmp_path / "run")) == 0
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    final = [r for r in records if "eval/accuracy" in r][-1]
    assert 0.0 <= final["eval/accuracy"] <= 1.0 and 0.0 <= final["eval/length_baseline_accuracy"] <= 1.0
    from jaxwrite.checkpoint import load_model_from_checkpoint
    from jaxwrite.models import RewardModel
    model, _ = load_model_from_checkpoint(tmp_path / "run")
    assert isinstance(model, RewardModel)
