"""The off-policy GRPO loop through the one trainer, in one short run: rollouts generated one step ahead
(rl.max_staleness 1) on a rollout mesh of their own (2 of the 8 simulated devices, weights synced device
to device), partial rollouts, DAPO's dynamic sampling and overlong penalty. A run stopped by SIGTERM
after step 2 (the rollout for step 3 already started, samples parked) and resumed logs the same metrics
as the run never stopped."""
import json
import os
import signal

import pytest

from jaxwrite.train import load_recipe
from train_fixtures import REPO, train_tokenizer, write_corpus

STEPS = 5
# Metrics that measure time (they differ between any two runs); everything else must repeat exactly.
TIMED = ("time/", "tokens_per_sec", "mfu", "rollout/seconds", "rollout/slowest_sample_s")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo_async")
    write_corpus(root)
    return root, train_tokenizer(root, root / "tok")


def _config(root, tok):
    values = {"data_dir": str(root), "tokenizer.path": str(tok), "model.num_layers": 1, "progress_bar": False,
              "peak_flops_per_device": 1e12, "rl.rewards": "('length', 'format')", "rl.reward_weights": "()",
              "rl.template": "plain", "rl.prompts_per_step": 2, "rl.group_size": 4, "rl.max_new_tokens": 16,
              "rl.length_task.count": 6, "rl.length_task.min_words": 3, "rl.length_task.max_words": 10,
              "rl.policy_recipe": "", "rl.rm_recipe": "", "num_steps": STEPS, "checkpoint_every": 1, "log_every": 1,
              "optimizer.learning_rate": 1e-2, "optimizer.min_lr_ratio": 1.0, "rl.samples_every": 1,
              "rl.samples_prompts": 1, "rl.max_staleness": 1, "rl.rollout_mesh": "(1,2,1)",
              "rl.partial_rollout_tokens": 6, "rl.dynamic_sampling": True, "rl.overlong_buffer": 4}
    return load_recipe(str(REPO / "configs" / "grpo_tiny.py"), [f"--config.{k}={v}" for k, v in values.items()])


def _records(workdir):
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    return [{k: v for k, v in r.items() if not any(t in k for t in TIMED)} for r in rows]


def test_async_partial_rollouts_on_their_own_mesh_resume_exactly(setup, tmp_path):
    from jaxwrite.train import TrainConfig, train
    from jaxwrite.train.trainer import Trainer

    root, tok = setup
    config = TrainConfig.from_recipe(_config(root, tok))
    full = tmp_path / "full"
    trainer = Trainer(config, str(full))
    train_devices = set(trainer.steps.mesh.devices.flat)
    rollout_devices = set(trainer.source.train.engine.mesh.devices.flat)
    assert len(train_devices) == 6 and len(rollout_devices) == 2 and not train_devices & rollout_devices
    assert trainer.run() == 0
    want = _records(full)
    raw = [json.loads(line) for line in (full / "metrics.jsonl").read_text().splitlines()]
    assert all("time/weight_sync_s" in r and "sampler/kl" in r and "is_weight_mean" in r for r in raw)
    assert max(r["rollout/staleness_max"] for r in want) >= 1            # rollouts came from older weights
    assert sum(r["partial/continued_samples"] for r in want) > 0          # parked samples were continued
    assert "reward/overlong/mean" in want[0] and "dynamic_sampling/dropped_groups" in want[0]

    def stop_after_step_2(info):
        if info.step == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    part = tmp_path / "part"
    assert train(config, str(part), hooks=[(stop_after_step_2, 1)]) == 0
    assert len((part / "metrics.jsonl").read_text().splitlines()) == 2
    assert train(config, str(part)) == 0
    got = _records(part)
    for step, (a, b) in enumerate(zip(got, want), start=1):
        assert a.keys() == b.keys(), step
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), (step, key, a[key], b[key])
    assert (part / "rollout_samples.jsonl").read_text() == (full / "rollout_samples.jsonl").read_text()
