"""GRPO math in one home: the update step's in-jit advantages are the registry estimator's, the policy
loss on the fused log-prob kernels has the reference gradients, and misspelt names fail early."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxwrite.common import InputError
from jaxwrite.kernels import token_logprobs
from jaxwrite.models import Transformer, get_preset
from jaxwrite.parallel import DEFAULT_RULES, make_mesh
from jaxwrite.rl import (ADVANTAGE_ESTIMATORS, LossSettings, group_advantages, group_rows, grpo_loss_fn,
                         grpo_policy_loss, row_advantages)
from jaxwrite.rl.grpo import policy_logprobs
from jaxwrite.train import StepFunctions, load_recipe
from train_fixtures import REPO


def _rewards():
    rewards = np.random.default_rng(0).normal(size=(3, 4, 2))  # [P, G, R]
    rewards[1] = 0.5                                             # a group with every reward constant
    return rewards


@pytest.mark.parametrize("method", ADVANTAGE_ESTIMATORS.names())
def test_row_advantages_in_jit_equal_the_estimator_on_any_rows(method):
    rewards, weights = _rewards(), (2.0, 1.0)
    want = group_advantages(rewards, method, weights).reshape(-1)   # [P*G], rows prompt-major
    rows = group_rows(rewards)
    assert rows["group_rewards"].shape == (12, 4, 2) and rows["group_index"].tolist() == [0, 1, 2, 3] * 3
    order = np.random.default_rng(1).permutation(12)[:8]            # a shuffled minibatch
    jitted = jax.jit(row_advantages, static_argnames=("method", "weights"))
    got = np.asarray(jitted(rows["group_rewards"][order], rows["group_index"][order], method=method,
                            weights=weights))
    np.testing.assert_allclose(got, want[order], rtol=1e-5, atol=1e-6)
    assert np.all(got[order // 4 == 1] == 0.0)                      # zero variance: exactly 0


def _grpo_batch(model, settings, rewards):
    rows, seq = rewards.shape[0] * rewards.shape[1], 16
    rng = np.random.default_rng(2)
    tokens = rng.integers(1, 64, (rows, seq)).astype(np.int32)
    batch = {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1), "attention_mask": np.ones((rows, seq), bool),
             "loss_mask": np.ones((rows, seq), np.float32), "sample_mask": np.ones((rows,), np.float32)}
    logp, _ = policy_logprobs(model, {k: jnp.asarray(v) for k, v in batch.items()}, settings)
    # Old log-probs off by up to ±0.5, so the ratio (and thus the loss) depends on the advantages.
    batch["logp_old"] = np.asarray(logp) + rng.uniform(-0.5, 0.5, (rows, seq)).astype(np.float32)
    batch.update(group_rows(rewards))
    return batch


def test_update_step_computes_the_registry_advantages_from_rewards():
    cfg = get_preset("tiny").replace(vocab_size=64, num_layers=1)
    model = Transformer(cfg, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    settings = LossSettings(advantage="grpo", reward_weights=(1.0, 3.0), kernel="chunked")
    rewards = np.random.default_rng(3).normal(size=(2, 4, 2))       # [P, G, R]
    batch = _grpo_batch(model, settings, rewards)
    steps = StepFunctions(model, optimizer, grpo_loss_fn, make_mesh((1, -1, 1)), DEFAULT_RULES, extra=settings)
    metrics = steps.evaluate(nnx.split((model, optimizer))[1], batch, jax.random.key(0))   # the jitted loss

    logp, _ = policy_logprobs(model, {k: jnp.asarray(v) for k, v in batch.items()}, settings)

    def loss_with(advantages):
        return float(grpo_policy_loss(logp, jnp.asarray(batch["logp_old"]), jnp.asarray(advantages, jnp.float32),
                                      jnp.asarray(batch["loss_mask"]))[0])

    want = loss_with(group_advantages(rewards, "grpo", (1.0, 3.0)).reshape(-1))
    np.testing.assert_allclose(float(metrics["loss"]), want, rtol=1e-4, atol=1e-6)
    # Another estimator gives another loss, so the comparison above can fail.
    assert abs(loss_with(group_advantages(rewards, "dr_grpo", (1.0, 3.0)).reshape(-1)) - want) > 1e-3


@pytest.mark.parametrize("impl", ["chunked", "pallas"])
def test_policy_loss_on_fused_logprobs_matches_reference_gradients(impl):
    k = jax.random.split(jax.random.key(1), 5)
    n, d, v, rows = 64, 32, 300, 4
    h, w = jax.random.normal(k[0], (n, d)), 0.4 * jax.random.normal(k[1], (d, v))
    ids = jax.random.randint(k[2], (n,), 0, v)
    logp_old = token_logprobs(h, w, ids, temperature=0.7, impl="reference")[0] \
        + 0.6 * jax.random.uniform(k[3], (n,), minval=-1.0, maxval=1.0)     # both clip bounds hit
    mask = (jax.random.uniform(k[4], (n,)) > 0.3).astype(jnp.float32)
    advantages = jnp.array([1.0, -0.5, 0.25, 2.0])                          # [rows]

    def grads(impl, **blocks):
        def loss(h, w):
            logp, _ = token_logprobs(h, w, ids, temperature=0.7, impl=impl, **blocks)
            return grpo_policy_loss(logp.reshape(rows, -1), logp_old.reshape(rows, -1), advantages,
                                    mask.reshape(rows, -1), eps_high=0.28)[0]
        return jax.value_and_grad(loss, argnums=(0, 1))(h, w)

    loss_ref, (dh_ref, dw_ref) = grads("reference")
    loss, (dh, dw) = grads(impl, block_tokens=16, block_vocab=128)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-5)
    for g, ref in ((dh, dh_ref), (dw, dw_ref)):
        assert np.max(np.abs(g - ref)) / np.max(np.abs(ref)) < 1e-5
    assert np.all(np.asarray(dh)[np.asarray(mask) == 0] == 0)               # masked tokens: no gradient


@pytest.mark.parametrize("key,value,kind", [("advantage", "longwriter_zer0", "advantage estimator"),
                                            ("loss_aggregation", "token_sum", "policy-loss aggregation")])
def test_misspelt_algorithm_names_fail_in_one_line(key, value, kind):
    with pytest.raises(InputError) as err:   # refused when the recipe is loaded, before anything runs
        load_recipe(str(REPO / "configs" / "grpo_tiny.py"), [f"--config.rl.{key}={value}"])
    message = str(err.value)
    assert "\n" not in message and f"field 'rl.{key}': unknown {kind} '{value}'" in message
    assert "expected one of:" in message
    assert "token_mean" in message or "longwriter_zero" in message


def test_on_policy_batch_without_logp_old_has_the_sampler_log_prob_gradient():
    # One update per rollout sends no logp_old: the loss holds its own log-probs constant instead.
    cfg = get_preset("tiny").replace(vocab_size=64, num_layers=1)
    model = Transformer(cfg, nnx.Rngs(0))
    settings = LossSettings(advantage="grpo", kernel="chunked")
    rewards = np.random.default_rng(4).normal(size=(2, 4, 1))
    batch = {k: jnp.asarray(v) for k, v in _grpo_batch(model, settings, rewards).items()}
    exact = dict(batch, logp_old=policy_logprobs(model, batch, settings)[0])
    without = {k: v for k, v in batch.items() if k != "logp_old"}
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def grads(b):
        return jax.grad(lambda p: grpo_loss_fn(nnx.merge(graphdef, p, rest), b, None, settings)[0])(params)

    for got, want in zip(jax.tree.leaves(grads(without)), jax.tree.leaves(grads(exact))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-7)
    # The off-policy batch (logp_old shifted) gives another gradient, so the comparison can fail.
    shifted = jax.tree.leaves(grads(batch))
    assert any(not np.allclose(a, b, rtol=1e-3, atol=1e-6) for a, b in zip(shifted, jax.tree.leaves(grads(exact))))
