"""GRPO clipped-surrogate loss: known values, gradients, clipping, masks, aggregations, KL."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxwrite.rl import LOSS_AGGREGATIONS, completed_mask, grpo_policy_loss


def _inputs(seed=0, b=3, t=5):
    rng = np.random.default_rng(seed)
    logp_old = jnp.asarray(-rng.uniform(0.5, 3.0, (b, t)), jnp.float32)
    logp_new = logp_old + jnp.asarray(rng.normal(0, 0.3, (b, t)), jnp.float32)
    adv = jnp.asarray(rng.normal(size=b), jnp.float32)
    mask = jnp.asarray(np.arange(t)[None, :] < np.array([t, 2, 4])[:b, None], jnp.float32)
    return logp_new, logp_old, adv, mask


def test_on_policy_loss_and_gradient():
    logp_old = jnp.full((2, 4), -1.0)
    mask = jnp.array([[1, 0, 0, 0], [1, 1, 1, 0]], jnp.float32)
    adv = jnp.array([1.0, 2.0])
    expected = {"token_mean": -7 / 4, "seq_mean_token_mean": -1.5, "constant": -7 / 8}
    for name, value in expected.items():
        loss, metrics = grpo_policy_loss(logp_old, logp_old, adv, mask, aggregation=name)
        assert float(loss) == pytest.approx(value)
        assert float(metrics["ratio_mean"]) == pytest.approx(1.0)
        assert float(metrics["approx_kl_old"]) == pytest.approx(0.0)
    grad = jax.grad(lambda lp: grpo_policy_loss(lp, logp_old, adv, mask)[0])(logp_old)
    np.testing.assert_allclose(grad, -adv[:, None] * mask / 4, rtol=1e-6)


@pytest.mark.parametrize("aggregation", LOSS_AGGREGATIONS.names())
def test_gradient_matches_finite_differences(aggregation):
    with jax.enable_x64(True):
        logp_new, logp_old, adv, mask = (x.astype(jnp.float64) for x in _inputs())
        logp_ref = logp_old - 0.1

        def loss_fn(lp):
            return grpo_policy_loss(lp, logp_old, adv, mask, logp_ref=logp_ref, beta=0.05,
                                    eps_high=0.28, aggregation=aggregation)[0]

        grad = jax.grad(loss_fn)(logp_new)
        direction = jnp.asarray(np.random.default_rng(1).normal(size=logp_new.shape))
        h = 1e-6
        numeric = (loss_fn(logp_new + h * direction) - loss_fn(logp_new - h * direction)) / (2 * h)
        assert float(jnp.sum(grad * direction)) == pytest.approx(float(numeric), rel=1e-5, abs=1e-9)


def test_clipping_zeroes_gradient_and_is_counted():
    logp_old = jnp.zeros((4, 1))
    # ratios 1.5 (A>0: clipped high), 0.5 (A<0: clipped low), 0.5 (A>0: not clipped), 1.25 (A>0)
    logp_new = jnp.log(jnp.array([[1.5], [0.5], [0.5], [1.25]]))
    adv = jnp.array([1.0, -1.0, 1.0, 1.0])
    mask = jnp.ones((4, 1))
    fn = lambda lp, **kw: grpo_policy_loss(lp, logp_old, adv, mask, **kw)  # noqa: E731
    grad = jax.grad(lambda lp: fn(lp)[0])(logp_new)[:, 0]
    assert float(grad[0]) == 0.0 and float(grad[1]) == 0.0 and float(grad[3]) == 0.0
    assert float(grad[2]) != 0.0
    _, metrics = fn(logp_new)
    assert float(metrics["clip_frac_high"]) == pytest.approx(2 / 4)
    assert float(metrics["clip_frac_low"]) == pytest.approx(1 / 4)
    # Clip-higher (DAPO) lets the 1.25 ratio through.
    grad_dapo = jax.grad(lambda lp: fn(lp, eps_high=0.28)[0])(logp_new)[:, 0]
    assert float(grad_dapo[3]) != 0.0 and float(grad_dapo[0]) == 0.0
    assert float(fn(logp_new, eps_high=0.28)[1]["clip_frac_high"]) == pytest.approx(1 / 4)


def test_masked_tokens_and_dropped_samples_do_not_matter():
    logp_new, logp_old, adv, mask = _inputs()
    loss, _ = grpo_policy_loss(logp_new, logp_old, adv, mask)
    garbage = jnp.where(mask > 0, logp_new, 123.0)
    assert float(grpo_policy_loss(garbage, logp_old, adv, mask)[0]) == pytest.approx(float(loss))
    grad = jax.grad(lambda lp: grpo_policy_loss(lp, logp_old, adv, mask)[0])(garbage)
    assert np.all(np.isfinite(np.asarray(grad)))

    keep = completed_mask(["stop", "length", "stop"])
    np.testing.assert_array_equal(keep, [True, False, True])
    dropped, _ = grpo_policy_loss(logp_new, logp_old, adv, mask, sample_mask=keep)
    manual, _ = grpo_policy_loss(logp_new, logp_old, adv, mask * jnp.asarray(keep)[:, None])
    assert float(dropped) == pytest.approx(float(manual))
    grad = jax.grad(lambda lp: grpo_policy_loss(lp, logp_old, adv, mask, sample_mask=keep)[0])(logp_new)
    assert np.all(np.asarray(grad[1]) == 0.0)


def test_seq_mean_ignores_fully_masked_sequences():
    logp_old = jnp.zeros((2, 3))
    adv = jnp.array([1.0, 5.0])
    mask = jnp.array([[1, 1, 0], [0, 0, 0]], jnp.float32)
    loss, _ = grpo_policy_loss(logp_old, logp_old, adv, mask, aggregation="seq_mean_token_mean")
    assert float(loss) == pytest.approx(-1.0)
    loss, _ = grpo_policy_loss(logp_old, logp_old, adv, mask, aggregation="constant", max_tokens=10)
    assert float(loss) == pytest.approx(-2 / 20)


def test_kl_penalty_k3():
    logp_old = jnp.zeros((1, 2))
    logp_ref = jnp.array([[0.0, np.log(2.0)]])
    mask = jnp.ones((1, 2))
    adv = jnp.zeros(1)
    loss, metrics = grpo_policy_loss(logp_old, logp_old, adv, mask, logp_ref=logp_ref, beta=0.5)
    k3 = 2.0 - np.log(2.0) - 1.0  # exp(d) − d − 1 at d = log 2
    assert float(metrics["kl_ref"]) == pytest.approx(k3 / 2, rel=1e-6)
    assert float(loss) == pytest.approx(0.5 * k3 / 2, rel=1e-6)
    no_beta, metrics = grpo_policy_loss(logp_old, logp_old, adv, mask, logp_ref=logp_ref)
    assert float(no_beta) == 0.0 and "kl_ref" in metrics
    with pytest.raises(ValueError, match="logp_ref"):
        grpo_policy_loss(logp_old, logp_old, adv, mask, beta=0.1)


def test_jit_and_shape_errors():
    logp_new, logp_old, adv, mask = _inputs()
    jitted = jax.jit(grpo_policy_loss, static_argnames=("aggregation", "eps_low", "eps_high", "beta"))
    loss, metrics = jitted(logp_new, logp_old, adv, mask, aggregation="constant")
    ref, _ = grpo_policy_loss(logp_new, logp_old, adv, mask, aggregation="constant")
    assert float(loss) == pytest.approx(float(ref), rel=1e-6)
    assert set(metrics) >= {"clip_frac_low", "clip_frac_high", "ratio_mean", "approx_kl_old", "loss"}
    with pytest.raises(ValueError, match="advantages"):
        grpo_policy_loss(logp_new, logp_old, adv[:2], mask)
    with pytest.raises(ValueError, match="shapes"):
        grpo_policy_loss(logp_new, logp_old[:, :2], adv, mask)
