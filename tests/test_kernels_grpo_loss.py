"""Clipped GRPO surrogate on the fused kernels, and its group-normalised entry point."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxwrite.kernels import (clipped_surrogate, group_zscore_advantages, grpo_loss_from_rewards,
                              grpo_policy_loss, token_logprobs)

N, D, V, TAU = 64, 32, 300, 0.7
BLOCKS = dict(block_tokens=16, block_vocab=128)


@pytest.fixture(scope="module")
def batch():
    k = jax.random.split(jax.random.key(1), 6)
    h = jax.random.normal(k[0], (N, D))
    w = 0.4 * jax.random.normal(k[1], (D, V))
    ids = jax.random.randint(k[2], (N,), 0, V)
    logp, _ = token_logprobs(h, w, ids, temperature=TAU, impl="reference")
    # Old log-probs off by up to ~±0.6 so both clip bounds are hit.
    logp_old = logp + 0.6 * jax.random.uniform(k[3], (N,), minval=-1.0, maxval=1.0)
    advantages = jax.random.normal(k[4], (N,))
    mask = (jax.random.uniform(k[5], (N,)) > 0.3).astype(jnp.float32)
    return h, w, ids, logp_old, advantages, mask


def _numpy_loss(logp, logp_old, adv, mask, eps_low, eps_high):
    r = np.exp(logp - logp_old)
    obj = np.minimum(r * adv, np.clip(r, 1 - eps_low, 1 + eps_high) * adv)
    return -np.sum(mask * obj) / max(mask.sum(), 1.0)


def test_surrogate_matches_numpy_and_clips_both_sides(batch):
    h, w, ids, logp_old, adv, mask = batch
    loss, metrics = grpo_policy_loss(h, w, ids, logp_old, adv, mask, temperature=TAU, eps_low=0.2,
                                     eps_high=0.28, impl="reference")
    want = _numpy_loss(*(np.asarray(x, np.float64) for x in (metrics["logp"], logp_old, adv, mask)), 0.2, 0.28)
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    _, clipped = clipped_surrogate(metrics["logp"], logp_old, adv, 0.2, 0.28)
    r = np.asarray(metrics["ratio"])
    assert np.any(np.asarray(clipped) & (r > 1.28)) and np.any(np.asarray(clipped) & (r < 0.8))
    assert 0.0 < float(metrics["clip_fraction"]) < 1.0


@pytest.mark.parametrize("impl", ["chunked", "pallas"])
def test_loss_gradients_match_reference(batch, impl):
    h, w, ids, logp_old, adv, mask = batch
    kwargs = dict(temperature=TAU, eps_low=0.2, eps_high=0.28, entropy_coef=0.01)

    def grads(impl, **blocks):
        f = lambda h, w: grpo_policy_loss(h, w, ids, logp_old, adv, mask, impl=impl, **blocks, **kwargs)[0]  # noqa: E731
        return jax.value_and_grad(f, argnums=(0, 1))(h, w)

    loss_ref, (dh_ref, dw_ref) = grads("reference")
    loss, (dh, dw) = grads(impl, **BLOCKS)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-5)
    for g, ref in ((dh, dh_ref), (dw, dw_ref)):
        assert np.max(np.abs(g - ref)) / np.max(np.abs(ref)) < 1e-5
    # Masked tokens contribute nothing to dh.
    assert np.all(np.asarray(dh)[np.asarray(mask) == 0] == 0)


def test_sequence_advantages_broadcast_by_segment(batch):
    h, w, ids, logp_old, _, mask = batch
    segment_ids = jnp.arange(N) // 16  # 4 sequences of 16 tokens
    seq_adv = jnp.array([1.0, -0.5, 0.25, 2.0])
    kw = dict(temperature=TAU, impl="chunked", **BLOCKS)
    per_seq, _ = grpo_policy_loss(h, w, ids, logp_old, seq_adv, mask, segment_ids=segment_ids, **kw)
    per_tok, _ = grpo_policy_loss(h, w, ids, logp_old, seq_adv[segment_ids], mask, **kw)
    np.testing.assert_allclose(per_seq, per_tok, rtol=1e-6)


def test_constant_normaliser_and_target_gradients(batch):
    h, w, ids, logp_old, adv, mask = batch
    kw = dict(temperature=TAU, impl="chunked", **BLOCKS)
    mean_loss, _ = grpo_policy_loss(h, w, ids, logp_old, adv, mask, **kw)
    sum_loss, _ = grpo_policy_loss(h, w, ids, logp_old, adv, mask, normaliser=1.0, **kw)
    np.testing.assert_allclose(sum_loss, mean_loss * float(mask.sum()), rtol=1e-5)

    def d_adv(through):
        f = lambda a: grpo_policy_loss(h, w, ids, logp_old, a, mask, grad_through_targets=through, **kw)[0]  # noqa: E731
        return jax.grad(f)(adv)

    assert np.all(np.asarray(d_adv(False)) == 0.0)
    assert np.any(np.asarray(d_adv(True)) != 0.0)


def test_group_zscore_per_reward_then_mean():
    rewards = jnp.array([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [6.0, 0.0]],
                         [[5.0, 1.0], [5.0, 2.0], [5.0, 3.0], [5.0, 4.0]]])  # [P=2, G=4, R=2]
    adv, zero_var = group_zscore_advantages(rewards)
    r = np.asarray(rewards, np.float64)
    # Sample std (ddof=1), the same convention as jaxwrite.rl.group_advantages.
    std = r.std(1, keepdims=True, ddof=1)
    z = (r - r.mean(1, keepdims=True)) / np.where(std == 0, 1, std)
    np.testing.assert_allclose(adv, z.mean(-1).reshape(-1), rtol=1e-6, atol=1e-7)
    assert int(zero_var) == 2  # reward 1 of group 0 and reward 0 of group 1 are constant
    adv2d, zero2d = group_zscore_advantages(rewards[..., 0])
    np.testing.assert_allclose(adv2d, z[..., 0].reshape(-1), rtol=1e-6, atol=1e-7)
    assert int(zero2d) == 1
    with pytest.raises(ValueError, match=r"\[P, G\] or \[P, G, R\]"):
        group_zscore_advantages(jnp.zeros(4))


def test_loss_from_rewards_is_one_jitted_function(batch):
    h, w, ids, logp_old, _, mask = batch
    rewards = jax.random.uniform(jax.random.key(3), (2, 2, 3))  # [P=2, G=2, R=3]: 4 sequences
    segment_ids = jnp.arange(N) // 16
    f = jax.jit(jax.value_and_grad(functools.partial(
        grpo_loss_from_rewards, temperature=TAU, eps_high=0.28, impl="chunked", **BLOCKS), argnums=(0, 1),
        has_aux=True))
    (loss, metrics), (dh, dw) = f(h, w, ids, logp_old, rewards, segment_ids, mask)
    adv, _ = group_zscore_advantages(rewards)
    want, _ = grpo_policy_loss(h, w, ids, logp_old, adv[segment_ids], mask, temperature=TAU, eps_high=0.28,
                               impl="reference")
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)  # z-scored advantages: loss sums near 0
    assert metrics["advantages"].shape == (4,) and int(metrics["zero_variance_groups"]) == 0
    assert dh.shape == (N, D) and dw.shape == (D, V)
