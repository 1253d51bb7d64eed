"""Per-step guard-rail metrics, loud warnings, and the reward-curve plot."""
import json
import logging

import numpy as np
import pytest

from jaxwrite.common import InputError
from jaxwrite.rl import (RolloutPrompt, RolloutSample, distribution_stats, group_advantages, plot_reward_curves,
                         rollout_step_metrics)


def _sample(words, finish="stop"):
    text = "<think>plan it</think><answer>" + " ".join(["word"] * words) + "</answer>"
    return RolloutSample(text=text, finish_reason=finish, num_tokens=words + 6)


def _batch(finishes):
    groups = [[_sample(10, finishes[0]), _sample(20, finishes[1])], [_sample(30), _sample(40)]]
    rewards = np.array([[[0.0, 1.0], [1.0, 1.0]], [[2.0, 3.0], [2.0, 3.0]]])  # [P=2, G=2, R=2]
    return rewards, group_advantages(rewards), groups


def test_metrics_values():
    rewards, adv, groups = _batch(["stop", "stop"])
    m = rollout_step_metrics(rewards, ["length", "format"], adv, groups, step=3)
    assert m["reward/length/mean"] == pytest.approx(1.25)
    assert m["reward/format/min"] == 1.0 and m["reward/format/max"] == 3.0
    assert m["reward/length/zero_variance_frac"] == 0.5
    assert m["reward/format/zero_variance_frac"] == 1.0
    assert m["reward/format/normalised_abs_mean"] == 0.0
    assert m["zero_variance_prompt_frac"] == 0.5
    assert m["answer_words/mean"] == 25.0 and m["answer_words/max"] == 40.0
    assert m["answer_words/p50"] == 25.0
    assert m["think_words/mean"] == 2.0
    assert m["truncated_frac"] == 0.0 and m["well_formed_frac"] == 1.0
    assert all(isinstance(v, float) for v in m.values())


def test_in_range_share_counts_well_formed_answers_inside_their_own_request():
    rewards, adv, groups = _batch(["stop", "stop"])   # answers of 10, 20 | 30, 40 words
    groups[1][1] = RolloutSample(text="<answer>" + " word" * 35, finish_reason="stop", num_tokens=36)  # malformed
    prompts = [RolloutPrompt(id="a", text="a", lower=15, upper=25, max_len=100),
               RolloutPrompt(id="b", text="b", lower=30, upper=50, max_len=100)]
    m = rollout_step_metrics(rewards, ["length", "format"], adv, groups, prompts=prompts)
    assert m["in_range_frac"] == 0.5   # 20 in [15, 25], 30 in [30, 50]; 10 short; the malformed one never counts
    assert "in_range_frac" not in rollout_step_metrics(rewards, ["length", "format"], adv, groups)
    with pytest.raises(ValueError, match="prompts: expected 2"):
        rollout_step_metrics(rewards, ["length", "format"], adv, groups, prompts=prompts[:1])


def test_truncation_warns_loudly(caplog):
    rewards, adv, groups = _batch(["length", "stop"])
    with caplog.at_level(logging.WARNING, logger="jaxwrite.rl.guardrails"):
        m = rollout_step_metrics(rewards, ["length", "format"], adv, groups, step=7, truncation_warning=0.2)
    assert m["truncated_frac"] == 0.25
    assert any("step 7: 25.0% of rollouts hit the generation cap" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="jaxwrite.rl.guardrails"):
        rollout_step_metrics(rewards, ["length", "format"], adv, groups, truncation_warning=0.3,
                             zero_variance_warning=0.4)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "every reward constant" in messages[0]


def test_shape_checks_and_stats():
    rewards, adv, groups = _batch(["stop", "stop"])
    with pytest.raises(ValueError, match="reward_names"):
        rollout_step_metrics(rewards, ["length"], adv, groups)
    with pytest.raises(ValueError, match="advantages"):
        rollout_step_metrics(rewards, ["a", "b"], adv[:1], groups)
    with pytest.raises(ValueError, match="samples"):
        rollout_step_metrics(rewards, ["a", "b"], adv, groups[:1])
    stats = distribution_stats(range(1, 11), "x")
    assert stats == {"x/mean": 5.5, "x/p50": 5.5, "x/p90": pytest.approx(9.1), "x/max": 10.0}


def test_plot_reward_curves(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    rewards, adv, groups = _batch(["stop", "stop"])
    with open(metrics, "w") as f:
        for step in (2, 1, 3):
            m = rollout_step_metrics(rewards + step, ["length", "format"], adv, groups)
            f.write(json.dumps({"step": step, **m}) + "\n")
    out = tmp_path / "plots" / "curves.png"
    plot_reward_curves(metrics, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1}\n{"step": "two"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2 field 'step'"):
        plot_reward_curves(bad, tmp_path / "x.png")
