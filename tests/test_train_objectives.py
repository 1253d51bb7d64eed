"""Objective losses against plain numpy, gradient accumulation, optimiser schedule, NaN guard, CLI."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxwrite.checkpoint import load_model_from_checkpoint
from jaxwrite.common import InputError, load_config
from jaxwrite.models import RewardModel, Transformer, get_preset
from jaxwrite.parallel import DEFAULT_RULES, make_mesh
from jaxwrite.train import (OptimizerConfig, StepFunctions, TrainingDiverged, bradley_terry_loss,
                            learning_rate_schedule, masked_next_token_loss, train)
from train_fixtures import REPO, tiny_overrides, train_tokenizer, write_corpus

CFG = get_preset("tiny").replace(vocab_size=64, num_layers=1)


def _lm_batch(rows=4, seq=8, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, CFG.vocab_size, (rows, seq + 1)).astype(np.int32)
    segments = np.ones((rows, seq), np.int32)
    segments[:, seq // 2:] = 2                                   # two documents per row
    positions = np.concatenate([np.arange(seq // 2)] * 2)[None].repeat(rows, 0).astype(np.int32)
    mask = rng.integers(0, 2, (rows, seq)).astype(np.int32)
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:], "loss_mask": mask, "segment_ids": segments,
            "positions": positions}


def test_masked_next_token_loss_matches_numpy():
    model = Transformer(CFG, nnx.Rngs(0))
    batch = _lm_batch()
    loss, metrics = masked_next_token_loss(model, {k: jnp.asarray(v) for k, v in batch.items()}, None)
    logits = np.asarray(model(batch["tokens"], positions=batch["positions"], segment_ids=batch["segment_ids"]).logits,
                         np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    nll = -np.take_along_axis(logp, batch["targets"][..., None], -1)[..., 0]
    want = (nll * batch["loss_mask"]).sum() / batch["loss_mask"].sum()
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    assert float(metrics["loss_tokens"]) == batch["loss_mask"].sum()


def test_bradley_terry_loss_accuracy_and_length_baseline():
    model = RewardModel(CFG, nnx.Rngs(1))
    rng = np.random.default_rng(0)
    chosen, rejected = rng.integers(0, 64, (3, 6)).astype(np.int32), rng.integers(0, 64, (3, 6)).astype(np.int32)
    batch = {"chosen_tokens": chosen, "rejected_tokens": rejected,
             "chosen_length": np.array([6, 3, 4], np.int32), "rejected_length": np.array([2, 5, 4], np.int32)}
    loss, m = bradley_terry_loss(model, {k: jnp.asarray(v) for k, v in batch.items()}, None)
    rc = np.array([float(model(chosen[i:i + 1, :n])[0]) for i, n in enumerate(batch["chosen_length"])])
    rr = np.array([float(model(rejected[i:i + 1, :n])[0]) for i, n in enumerate(batch["rejected_length"])])
    np.testing.assert_allclose(float(loss), np.mean(np.log1p(np.exp(-(rc - rr)))), rtol=1e-5)
    assert float(m["accuracy"]) == pytest.approx(np.mean(rc > rr))
    assert float(m["length_baseline_accuracy"]) == pytest.approx((1 + 0 + 0.5) / 3)   # longer / shorter / tie


def _one_step(accum):
    mesh = make_mesh((1, -1, 1))
    model = Transformer(CFG, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    steps = StepFunctions(model, optimizer, masked_next_token_loss, mesh, DEFAULT_RULES, accum)
    batch = _lm_batch(rows=8)
    batch["loss_mask"][:] = 1            # equal token counts per microbatch: mean of means == full mean
    state, metrics = steps.train(nnx.split((model, optimizer))[1], batch, jax.random.key(0))
    return jax.device_get(nnx.to_pure_dict(state)), jax.device_get(metrics)


def test_gradient_accumulation_matches_full_batch():
    full_state, full = _one_step(1)
    acc_state, acc = _one_step(2)
    np.testing.assert_allclose(acc["loss"], full["loss"], rtol=1e-5)
    np.testing.assert_allclose(acc["grad_norm"], full["grad_norm"], rtol=1e-4)
    for a, b in zip(jax.tree.leaves(acc_state), jax.tree.leaves(full_state)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_warmup_then_cosine_schedule():
    opt = OptimizerConfig(learning_rate=1.0, warmup_steps=4, min_lr_ratio=0.1)
    sched = learning_rate_schedule(opt, 20)
    assert float(sched(0)) == 0.0 and float(sched(2)) == pytest.approx(0.5)
    assert float(sched(4)) == pytest.approx(1.0) and float(sched(20)) == pytest.approx(0.1)
    assert float(sched(10)) < float(sched(6))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    data = write_corpus(root / "data")
    return data, train_tokenizer(data, root / "tok")


def test_nan_loss_stops_and_keeps_last_good_checkpoint(corpus, tmp_path, capsys):
    data, tok = corpus
    overrides = tiny_overrides(data, tok, num_steps=30, checkpoint_every=1, log_every=1,
                               **{"optimizer.learning_rate": 1e30, "optimizer.warmup_steps": 0,
                                  "optimizer.clip_norm": 1e30})
    config = load_config(str(REPO / "configs" / "cpt_tiny.py"), overrides)
    with pytest.raises(TrainingDiverged) as err:
        train(config, str(tmp_path))
    message = str(err.value)
    # Step 1 (finite loss, parameters blown up to ~1e30) is saved; step 2 diverges and is not.
    assert message.startswith("step 2: loss is nan") and "Last good checkpoint: step 1" in message
    steps = sorted(int(n) for n in os.listdir(tmp_path / "checkpoints") if n.isdigit())
    assert steps == [1]
    model, _ = load_model_from_checkpoint(tmp_path)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(nnx.to_pure_dict(nnx.state(model))))
    logged = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert all(np.isfinite(r["loss"]) for r in logged if "loss" in r)


def test_cli_rejects_unknown_override(corpus, tmp_path, capsys):
    from jaxwrite.cli import main
    rc = main(["train", "--config", str(REPO / "configs" / "cpt_tiny.py"), "--workdir", str(tmp_path),
               "--config.num_stepz=3"])
    assert rc == 2
    assert "unknown config key 'num_stepz'" in capsys.readouterr().err


def test_init_from_model_dir_loads_weights_onto_mesh(tmp_path):
    from jaxwrite.checkpoint import save_model_dir
    from jaxwrite.train import create_model_and_optimizer
    source = Transformer(CFG, nnx.Rngs(7))
    save_model_dir(tmp_path / "base", source, CFG)
    model, optimizer = create_model_and_optimizer("transformer", CFG, optax.adamw(1e-3), 0, make_mesh((1, 2, 4)),
                                                  DEFAULT_RULES, init_from=str(tmp_path / "base"))
    np.testing.assert_array_equal(model.layers.mlp.up.get_value(), source.layers.mlp.up.get_value())
    assert model.layers.mlp.up.get_value().sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor")
    with pytest.raises(InputError, match=r"parameter layers.mlp.down: expected shape \(1, 256, 64\), found \(1, 128, 64\)"):
        create_model_and_optimizer("transformer", CFG.replace(d_ff=256), optax.adamw(1e-3), 0, make_mesh((1, 2, 4)),
                                   DEFAULT_RULES, init_from=str(tmp_path / "base"))
