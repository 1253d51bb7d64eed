"""Off-policy GRPO pieces: the engine's sampler log-probs against the update step's, truncated importance
weights, partial rollouts continued across engine calls, the DAPO set (dynamic sampling's filter, the
overlong penalty in tokens) and the one-line refusals of bad settings."""
import jax.numpy as jnp
import numpy as np
import pytest

from jaxwrite.common import InputError
from jaxwrite.infer import SamplingParams
from jaxwrite.rl import IS_CORRECTIONS, RLConfig, importance_weights, informative_groups, overlong_penalty
from jaxwrite.rl.grpo import LossSettings, policy_logprobs
from jaxwrite.rl.rollout import Group, RolloutSettings, Trajectory, advance, groups_rollout, rollout_arrays
from jaxwrite.rl.types import RolloutPrompt
from test_infer_support import engine, model, tokenizer

PROMPT = RolloutPrompt("p0", "the writing model judge", 3, 10, 40)


def _group(settings, position=0):
    return Group(position, PROMPT, tokenizer().encode("User: the writing model judge\nAssistant:"),
                 [Trajectory() for _ in range(settings.group_size)])


def _seeds(position, segment, sample):
    return 1_000 * position + 10 * segment + sample


def _trainer_logps(rollout_batch, temperature):
    """The update step's log-probs of the same rows (the fused-kernel path GRPO trains with)."""
    batch = {k: jnp.asarray(v) for k, v in rollout_batch.items()}
    logp, _ = policy_logprobs(model(), batch, LossSettings(temperature=temperature))
    return np.asarray(logp)                                                       # [rows, T]


def test_importance_weights_are_one_when_the_sampler_is_the_policy():
    """s = 0: the engine samples with the weights the update starts from, so its log-prob of every token
    equals the update step's (to float32 rounding) and the truncated weights are 1; a cap below 1 or a
    sampler that disagrees moves them."""
    settings = RolloutSettings(SamplingParams(temperature=0.8, max_new_tokens=10, n=4), template="plain")
    group = _group(settings)
    advance(engine(), [group], settings, budget=10, version=0, seed_of=_seeds)
    arrays = rollout_arrays(groups_rollout([group], settings, 0), tokenizer().pad_id, False)
    trainer = _trainer_logps(arrays, 0.8)
    mask = jnp.asarray(arrays["loss_mask"])
    assert float(mask.sum()) >= 8
    weights = np.asarray(importance_weights(jnp.asarray(trainer), jnp.asarray(arrays["logp_sampler"]), mask, "tis"))
    np.testing.assert_allclose(weights, 1.0, atol=1e-4)
    exact = importance_weights(jnp.asarray(trainer), jnp.asarray(trainer), mask, "tis", cap=2.0)
    assert bool(jnp.all(exact == 1.0))
    assert bool(jnp.all(importance_weights(jnp.asarray(trainer), jnp.asarray(trainer) - 3.0, mask, "tis", 2.0)
                        == jnp.where(mask > 0, 2.0, 1.0)))                 # capped at C on the tokens
    assert set(IS_CORRECTIONS.names()) >= {"none", "tis"}


def test_partial_rollouts_continue_parked_samples_and_keep_their_log_probs():
    """A 12-token budget in calls of 5: samples are parked after 5 and 10 tokens and continued from
    their tokens (re-prefilled); each token keeps the log-prob of the call that sampled it, and all equal
    the full forward pass's tempered log-probs of the finished sequence."""
    eng = engine(eos_ids=[])                      # every sample runs to its budget
    settings = RolloutSettings(SamplingParams(temperature=0.9, max_new_tokens=12, n=3), template="plain")
    group = _group(settings)
    kept = []
    for call, expect in enumerate((5, 10, 12)):
        advance(eng, [group], settings, budget=5, version=call, seed_of=_seeds)
        assert [len(t.ids) for t in group.samples] == [expect] * 3
        assert group.done == (expect == 12) and all(t.first_version == 0 for t in group.samples)
        for t, before in zip(group.samples, kept):
            assert t.logps[:len(before)] == before            # earlier tokens keep their sampler log-probs
        kept = [list(t.logps) for t in group.samples]
    assert all(t.finish == "length" and t.segments == 3 for t in group.samples)
    arrays = rollout_arrays(groups_rollout([group], settings, 0), tokenizer().pad_id, False)
    mask = arrays["loss_mask"] > 0
    np.testing.assert_allclose(arrays["logp_sampler"][mask], _trainer_logps(arrays, 0.9)[mask], atol=2e-4)
    assert len({tuple(t.ids) for t in group.samples}) > 1


def test_a_stop_string_split_across_two_calls_ends_the_sample():
    """Greedy, calls of 5 tokens, a stop string spanning tokens 4-6: neither call's own text holds it,
    the sample's whole text does, so the sample ends there with the fewest tokens that hold it."""
    eng = engine(eos_ids=[])
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12, n=1)
    whole = _group(RolloutSettings(greedy, template="plain"))
    advance(eng, [whole], RolloutSettings(greedy, template="plain"), budget=12, version=0, seed_of=_seeds)
    ids, tok = whole.samples[0].ids, tokenizer()
    text, head = tok.decode(ids), tok.decode(ids[:5])
    stop = text[len(head) - 2:len(head) + 2]
    assert text.find(stop) == len(head) - 2 and stop not in head and stop not in tok.decode(ids[5:])
    settings = RolloutSettings(greedy, template="plain", stop=(stop,))
    group = _group(settings)
    advance(eng, [group], settings, budget=5, version=0, seed_of=_seeds)
    assert not group.done
    advance(eng, [group], settings, budget=5, version=1, seed_of=_seeds)
    t = group.samples[0]
    assert t.finish == "stop" and t.stop_string == stop and t.text == text[:len(head) - 2]
    end = next(n for n in range(6, 13) if stop in tok.decode(ids[:n]))
    assert t.ids == ids[:end] and len(t.logps) == end


def test_dapo_dynamic_sampling_filter_and_overlong_penalty():
    rewards = np.array([[[1.0, 0.0], [1.0, 0.0]],           # every reward constant: dropped
                        [[1.0, 0.0], [0.0, 0.0]],           # one reward varies: kept
                        [[0.5, 0.5], [0.5, 0.5]]])          # [P=3, G=2, R=2]
    assert informative_groups(rewards).tolist() == [False, True, False]
    assert informative_groups(rewards, "grpo").tolist() == [False, True, False]
    # DAPO eq. 13, in tokens: 0 up to L_max - L_cache, then linear to -penalty at the cap.
    np.testing.assert_allclose(overlong_penalty([0, 96, 100, 112, 128], 128, 32, 0.5),
                               [0.0, 0.0, -0.0625, -0.25, -0.5])
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty([1], 128, 128)


@pytest.mark.parametrize("values, field, says", [
    ({"max_staleness": -1}, "rl.max_staleness", "non-negative"),
    ({"is_cap": 0.0}, "rl.is_cap", "> 0"),
    ({"dynamic_sampling": True, "group_size": 1}, "rl.dynamic_sampling", "group size"),
    ({"partial_rollout_tokens": 200, "max_new_tokens": 128}, "rl.partial_rollout_tokens", "above max_new_tokens"),
    ({"overlong_buffer": 4, "reward_weights": (1.0, 1.0, 1.0)}, "rl.reward_weights", "overlong"),
    ({"rollout_mesh": (1, 2)}, "rl.rollout_mesh", "three positive sizes"),
])
def test_bad_settings_are_one_line_errors_naming_the_field(values, field, says):
    with pytest.raises(InputError) as err:
        RLConfig(**values)
    assert err.value.field == field and says in str(err.value) and "\n" not in str(err.value)


def test_importance_correction_auto_follows_the_loop():
    assert RLConfig().importance_correction == "none"
    assert RLConfig(max_staleness=1).importance_correction == "tis"
    assert RLConfig(partial_rollout_tokens=64, max_new_tokens=128).importance_correction == "tis"
    assert RLConfig(max_staleness=1, is_correction="none").importance_correction == "none"
    assert RLConfig(overlong_buffer=16).reward_names == ("length", "writing_rm", "format", "overlong")
    assert LossSettings.from_config(RLConfig(max_staleness=1, is_cap=3.0)) == LossSettings(
        temperature=0.8, max_tokens=14_000, is_correction="tis", is_cap=3.0)


def test_the_paper_recipe_keeps_the_synchronous_loop_and_dapo_off():
    from jaxwrite.train import TrainConfig, load_recipe
    rl = TrainConfig.from_recipe(load_recipe("grpo_longwriter_zero_32b", [])).rl
    assert (rl.max_staleness, rl.partial_rollout_tokens, rl.dynamic_sampling, rl.overlong_buffer, rl.eps_high) == \
        (0, 0, False, 0, None)
    assert rl.importance_correction == "none" and rl.loss_aggregation == "token_mean"


def test_step_time_rows_split_the_step_and_the_rollout(tmp_path):
    from jaxwrite.common import append_jsonl
    from jaxwrite.rl import step_time_rows
    path = tmp_path / "metrics.jsonl"
    for step in (1, 2, 3):   # step 1 compiles and is left out
        append_jsonl(path, {"step": step, "time/data_s": 9.0 if step == 1 else 3.0, "time/update_s": 1.0,
                            "rollout/seconds": 2.5, "time/weight_sync_s": 0.5, "time/decode_s": 1.5,
                            "time/reward/writing_rm_s": 0.75, "rollout/finished_row_share": 0.25})
    times, figures = step_time_rows(path)
    assert times == [["step: wait for the rollout", 3.0, 0.75], ["step: update", 1.0, 0.25],
                     ["rollout: weight sync", 0.5, 0.5 / 3], ["rollout: decode", 1.5, 0.5],
                     ["rollout: reward writing_rm", 0.75, 0.25]]
    assert figures == [["decode row-steps on finished rows (long-tail waste)", 0.25]]
