"""Group advantage estimators: formulas, zero-variance groups, numpy/jnp parity, jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxwrite.rl import ADVANTAGE_ESTIMATORS, group_advantages, group_advantages_with_stats, group_zscore


def _z(x):
    """Reference z-score of a 1-D group with sample std (ddof=1)."""
    return (x - x.mean()) / x.std(ddof=1)


@pytest.fixture
def rewards():
    rng = np.random.default_rng(0)
    return rng.normal(size=(3, 4, 3)) * np.array([1.0, 10.0, 0.1])  # [P, G, R], very different scales


def test_longwriter_zero_is_mean_of_per_reward_zscores(rewards):
    adv = group_advantages(rewards, "longwriter_zero")
    for p in range(3):
        expected = np.mean([_z(rewards[p, :, r]) for r in range(3)], axis=0)
        np.testing.assert_allclose(adv[p], expected, atol=1e-4)
    weights = [2.0, 1.0, 1.0]
    adv_w = group_advantages(rewards, "longwriter_zero", weights=weights)
    expected = (2 * _z(rewards[0, :, 0]) + _z(rewards[0, :, 1]) + _z(rewards[0, :, 2])) / 4
    np.testing.assert_allclose(adv_w[0], expected, atol=1e-4)


def test_grpo_dr_grpo_rloo_formulas(rewards):
    weights = np.array([1.0, 0.5, 2.0])
    total = rewards @ weights  # [P, G]
    grpo = group_advantages(rewards, "grpo", weights=weights)
    dr = group_advantages(rewards, "dr_grpo", weights=weights)
    rloo = group_advantages(rewards, "rloo", weights=weights)
    for p in range(3):
        s = total[p]
        np.testing.assert_allclose(grpo[p], _z(s), atol=1e-4)
        np.testing.assert_allclose(dr[p], s - s.mean(), rtol=1e-6)
        loo = [s[i] - np.delete(s, i).mean() for i in range(4)]
        np.testing.assert_allclose(rloo[p], loo, rtol=1e-6)


def test_sum_then_normalise_differs_from_normalise_then_average(rewards):
    # The large-scale reward dominates grpo but not longwriter_zero.
    lz = group_advantages(rewards, "longwriter_zero")
    grpo = group_advantages(rewards, "grpo")
    assert not np.allclose(lz, grpo, atol=1e-2)


def test_constant_reward_contributes_exactly_zero():
    rewards = np.zeros((2, 4, 2))
    rewards[:, :, 0] = [[0.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0]]
    rewards[:, :, 1] = 0.1  # constant; its float mean is not exactly 0.1
    adv = group_advantages(rewards, "longwriter_zero")
    np.testing.assert_allclose(adv[0], _z(rewards[0, :, 0]) / 2, rtol=1e-6)
    assert np.all(adv[1] == 0.0)
    for method in ADVANTAGE_ESTIMATORS.names():
        out = group_advantages(rewards, method)
        assert np.all(np.isfinite(out)), method
        assert np.all(out[1] == 0.0), method


def test_group_of_one_gives_zero_not_nan():
    rewards = np.ones((3, 1, 2))
    for method in ADVANTAGE_ESTIMATORS.names():
        out = group_advantages(rewards, method)
        assert out.shape == (3, 1) and np.all(out == 0.0), method


def test_stats_count_zero_variance_groups_and_prompts():
    rewards = np.array([
        [[1, 0], [1, 1]],   # reward 0 constant, reward 1 varies
        [[2, 3], [2, 3]],   # both constant
        [[0, 5], [1, 5]],   # reward 1 constant
    ], np.float64)
    adv, stats = group_advantages_with_stats(rewards)
    np.testing.assert_array_equal(stats["zero_variance_groups"], [2, 2])
    assert int(stats["zero_variance_prompts"]) == 1
    assert int(stats["zero_advantage_prompts"]) == 1
    assert adv.shape == (3, 2)


def test_jnp_matches_numpy_and_jits(rewards):
    jitted = jax.jit(group_advantages_with_stats, static_argnames="method")
    for method in ADVANTAGE_ESTIMATORS.names():
        ref = group_advantages(rewards, method)
        out, stats = jitted(jnp.asarray(rewards, jnp.float32), method=method)
        assert isinstance(out, jax.Array) and out.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-4, atol=1e-5)
        assert int(stats["zero_variance_prompts"]) == 0


def test_integer_rewards_and_zscore_shape():
    adv = group_advantages([[[0], [1]]], "grpo")
    assert adv.dtype == np.float64
    np.testing.assert_allclose(adv, [[-1 / np.sqrt(2), 1 / np.sqrt(2)]], rtol=1e-5)
    assert group_zscore(np.zeros((2, 3, 4))).shape == (2, 3, 4)


def test_bad_inputs():
    with pytest.raises(ValueError, match="num_rewards"):
        group_advantages(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="weights"):
        group_advantages(np.zeros((2, 3, 2)), weights=[1.0])
    with pytest.raises(ValueError, match="weights"):
        group_advantages(np.zeros((2, 3, 2)), weights=[1.0, -1.0])
    with pytest.raises(KeyError, match="longwriter_zero"):
        group_advantages(np.zeros((2, 3, 2)), method="nope")
