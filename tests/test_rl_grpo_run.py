"""GRPO through the one trainer: rollouts via the engine, rewards, advantages, fused-kernel loss,
several updates per rollout, metrics in metrics.jsonl, and exact resume mid-rollout."""
import json

import numpy as np
import pytest

from jaxwrite.train import load_recipe
from jaxwrite.rl.rollout import Rollout, rollout_arrays
from jaxwrite.rl.types import RolloutPrompt, RolloutSample
from train_fixtures import REPO, train_tokenizer, write_corpus


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo")
    write_corpus(root)
    return root, train_tokenizer(root, root / "tok")


def _config(root, tok, **extra):
    values = {"data_dir": str(root), "tokenizer.path": str(tok), "model.num_layers": 1, "progress_bar": False,
              "peak_flops_per_device": 1e12, "rl.rewards": "('length', 'format')", "rl.reward_weights": "()", "rl.prompts_per_step": 2,
              "rl.group_size": 4, "rl.max_new_tokens": 16, "rl.updates_per_rollout": 2, "rl.length_task.count": 6,
              "rl.length_task.min_words": 3, "rl.length_task.max_words": 10, "rl.policy_recipe": "",
              "rl.rm_recipe": "", "num_steps": 4, "checkpoint_every": 1, "log_every": 1,
              "optimizer.learning_rate": 1e-2,
              # A constant LR, so the schedule does not depend on num_steps (the partial run stops at 3).
              "optimizer.min_lr_ratio": 1.0, **extra}
    return load_recipe(str(REPO / "configs" / "grpo_tiny.py"), [f"--config.{k}={v}" for k, v in values.items()])


def _losses(workdir):
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if "loss" in r]


def test_grpo_trains_logs_rewards_and_resumes_exactly(setup, tmp_path):
    from jaxwrite.train import train   # "grpo" resolves without importing jaxwrite.rl first

    root, tok = setup
    full = tmp_path / "full"
    samples = {"rl.samples_every": 1, "rl.samples_prompts": 1}   # one prompt's group of every rollout
    assert train(_config(root, tok, **samples), str(full)) == 0
    rows = [json.loads(line) for line in (full / "metrics.jsonl").read_text().splitlines()]
    # Rollout metrics arrive on the steps that started a rollout (every updates_per_rollout steps).
    assert "reward/length/mean" in rows[0] and "truncated_frac" in rows[0] and "clip_frac_low" in rows[0]
    assert "reward/length/mean" not in rows[1]
    assert all(np.isfinite(r["loss"]) for r in rows)

    # Stop after step 3 (mid-rollout: its second update is step 4), then resume to 4.
    part = tmp_path / "part"
    assert train(_config(root, tok, num_steps=3, **samples), str(part)) == 0
    assert train(_config(root, tok, **samples), str(part)) == 0
    np.testing.assert_allclose([l for _, l in _losses(part)], [l for _, l in _losses(full)], rtol=1e-5, atol=1e-7)
    _check_rollout_samples(full / "rollout_samples.jsonl")
    # The resumed run wrote each rollout's samples once, and the same ones as the run never stopped.
    assert (part / "rollout_samples.jsonl").read_text() == (full / "rollout_samples.jsonl").read_text()


def _check_rollout_samples(path):
    """Readable GRPO samples: one prompt's whole group of 4 per rollout, rollouts 0 and 1 (first trained
    at steps 1 and 3), each with its prompt, plan, answer, every reward and its group advantage."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["rollout"], r["step"], r["sample"]) for r in rows] == [(0, 1, g) for g in range(4)] + \
        [(1, 3, g) for g in range(4)]
    for r in rows:
        assert set(r["rewards"]) == {"length", "format"} and isinstance(r["prompt"], str) and r["prompt"]
        assert r["answer"] is None or r["well_formed"]               # the scorers' one extraction rule
        assert "plan" in r and len(r["target_words"]) == 2 and r["finish_reason"] in ("stop", "length")
    for rollout in (0, 1):
        group = [r for r in rows if r["rollout"] == rollout]
        assert len({r["prompt_id"] for r in group}) == 1
        # Group advantages are centred within the group (each reward z-scored, then averaged).
        assert abs(sum(r["advantage"] for r in group)) < 1e-4


def test_rollout_arrays_mask_only_completion_tokens():
    prompt = RolloutPrompt("p", "x", 1, 2, 10)
    samples = [RolloutSample("a", "stop", 2), RolloutSample("b", "length", 3)]
    rollout = Rollout([prompt], [samples], [[5, 6, 7]], [[8, 9], [10, 11, 12]], 5)
    arrays = rollout_arrays(rollout, pad_id=0, mask_truncated=True)
    assert arrays["tokens"].shape == (2, 64)
    assert arrays["tokens"][1, :6].tolist() == [5, 6, 7, 10, 11, 12]
    # Position t predicts t+1: completion tokens 10, 11, 12 are predicted at positions 2, 3, 4.
    assert np.nonzero(arrays["loss_mask"][1])[0].tolist() == [2, 3, 4]
    assert arrays["targets"][1, 2:5].tolist() == [10, 11, 12]
    assert arrays["sample_mask"].tolist() == [1.0, 0.0]      # the truncated sample is masked out
    assert "advantages" not in arrays                         # computed in the update step from the rewards


def _record_dependency_runs(monkeypatch, **fields):
    """Replaces the trainer: each call records {name: read(config)} and its workdir, in the list returned."""
    import jaxwrite.train

    runs = []

    def fake_train(config, workdir):
        runs.append({**{name: read(config) for name, read in fields.items()}, "workdir": workdir})
        return 0

    monkeypatch.setattr(jaxwrite.train, "train", fake_train)
    return runs


def test_policy_recipe_is_trained_with_its_overrides(setup, tmp_path, monkeypatch):
    """The self-contained recipe trains its policy with rl.policy_recipe_overrides applied (the tiny
    GRPO recipe relies on short pretraining documents so its policy learns to stop)."""
    from jaxwrite.rl import prepare_grpo

    root, tok = setup
    runs = _record_dependency_runs(monkeypatch, max_chars=lambda c: c.data.max_chars, steps=lambda c: c.num_steps)
    config = _config(root, tok, **{"rl.policy_recipe": "configs/cpt_tiny.py", "rl.policy_recipe_steps": 7})
    assert config.rl.policy_recipe_overrides == ("data.max_chars=400",)
    prepared = prepare_grpo(config, str(tmp_path))
    assert runs == [{"max_chars": 400, "steps": 7, "workdir": str(tmp_path / "policy_init")}]
    assert prepared.model.init_from == str(tmp_path / "policy_init" / "checkpoints")


def test_rm_recipe_is_trained_with_its_overrides(setup, tmp_path, monkeypatch):
    """rl.rm_recipe_overrides reach the writing RM's recipe (the real-model quickstart shrinks its eval)."""
    from jaxwrite.rl import prepare_grpo

    root, tok = setup
    runs = _record_dependency_runs(monkeypatch, eval_pairs=lambda c: c.data.max_eval_pairs,
                                   steps=lambda c: c.num_steps)
    config = _config(root, tok, **{"rl.rewards": "('length', 'writing_rm')", "rl.reward_weights": "(1.0, 1.0)",
                                   "rl.rm_recipe": "configs/rm_tiny_degraded.py", "rl.rm_recipe_steps": 2,
                                   "rl.rm_recipe_overrides": "('data.max_eval_pairs=16',)"})
    prepared = prepare_grpo(config, str(tmp_path))
    assert runs == [{"eval_pairs": 16, "steps": 2, "workdir": str(tmp_path / "rm")}]
    assert prepared.rl.rm_path == str(tmp_path / "rm" / "checkpoints")


def test_pretrained_policy_is_warmed_up_on_protocol_records_only_when_asked(setup, tmp_path, monkeypatch):
    """With rl.policy_recipe_from_init an SFT policy recipe starts from the run's own checkpoint and
    trains on the protocol chat records; without it a pretrained init_from skips the recipe (as before)."""
    import jaxwrite.train
    from jaxwrite.rl import prepare_grpo

    root, tok = setup
    seen = []

    def fake_train(config, workdir):
        seen.append((config.model.init_from, config.data.train_path, config.num_steps, workdir))
        return 0

    monkeypatch.setattr(jaxwrite.train, "train", fake_train)
    pretrained = str(tmp_path / "my_model")
    extra = {"model.init_from": pretrained, "rl.policy_recipe": "configs/writer_sft_tiny.py",
             "rl.policy_recipe_steps": 3, "rl.policy_recipe_overrides": "()", "rl.protocol_docs": 6,
             "rl.length_task.min_words": 10, "rl.length_task.max_words": 60}
    assert prepare_grpo(_config(root, tok, **extra), str(tmp_path / "skip")).model.init_from == pretrained
    assert seen == []
    prepared = prepare_grpo(_config(root, tok, **extra, **{"rl.policy_recipe_from_init": True}), str(tmp_path))
    records = tmp_path / "policy_init" / "protocol_records.jsonl"
    assert seen == [(pretrained, str(records), 3, str(tmp_path / "policy_init"))]
    assert prepared.model.init_from == str(tmp_path / "policy_init" / "checkpoints")
    assert len(records.read_text().splitlines()) == 6
    assert prepare_grpo(prepared, str(tmp_path / "again")) == prepared and len(seen) == 1   # idempotent


def test_row_lengths_pad_to_quarter_octave_sizes():
    from jaxwrite.rl.rollout import length_bucket as _bucket
    assert [_bucket(n) for n in (1, 64, 65, 200, 257, 295, 14000)] == [64, 64, 128, 256, 320, 320, 14336]
    for n in range(1, 5000, 7):   # never shorter, at most a quarter (or one 64 step) of padding
        size = _bucket(n)
        assert n <= size <= max(n + 63, int(n * 1.25) + 1) and size % 64 == 0

