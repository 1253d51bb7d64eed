"""Checkpoints: cross-mesh restore, shape-mismatch errors, RNG / data state round trips, model dirs."""
import json

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from jaxwrite.checkpoint import Checkpointer, load_model_from_checkpoint, save_model_dir, write_model_config
from jaxwrite.common import InputError
from jaxwrite.models import RewardModel, Transformer, get_preset
from jaxwrite.parallel import make_mesh, shard_model

CFG = get_preset("tiny")


def _trained_pair(mesh):
    """A sharded model and an optimiser that has taken one step (non-zero moments)."""
    model = Transformer(CFG, nnx.Rngs(0))
    shard_model(model, mesh)
    optimizer = nnx.Optimizer(model, optax.adamw(1e-2), wrt=nnx.Param)
    tokens = jax.numpy.arange(16, dtype=jax.numpy.int32).reshape(2, 8)

    @nnx.jit   # one compiled step; op-by-op dispatch on 8 simulated devices is slow
    def step(model, optimizer):
        optimizer.update(model, nnx.grad(lambda m: m(tokens).logits.mean())(model))

    step(model, optimizer)
    return model, optimizer


def _values(tree):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.to_pure_dict(nnx.state(tree)))]


def test_save_on_one_mesh_restore_on_another(tmp_path):
    model, optimizer = _trained_pair(make_mesh((8, 1, 1)))
    ckpt = Checkpointer(tmp_path / "ckpt", keep=2)
    data_state = {"parent": {"index": 17}, "piece": 2}
    ckpt.save(7, model, optimizer, jax.random.key(123), data_state, extra={"note": "x"})
    ckpt.close()

    mesh = make_mesh((1, 2, 4))
    fresh = Transformer(CFG, nnx.Rngs(1))
    fresh_opt = nnx.Optimizer(fresh, optax.adamw(1e-2), wrt=nnx.Param)
    restored = Checkpointer(tmp_path / "ckpt").restore(fresh, fresh_opt, mesh=mesh)

    assert restored.step == 7 and restored.data_state == data_state and restored.extra == {"note": "x"}
    np.testing.assert_array_equal(jax.random.key_data(restored.rng), jax.random.key_data(jax.random.key(123)))
    for a, b in zip(_values(model) + _values(optimizer), _values(fresh) + _values(fresh_opt)):
        np.testing.assert_array_equal(a, b)
    q = fresh.layers.attn.q.get_value()
    assert q.sharding.mesh.shape == {"data": 1, "fsdp": 2, "tensor": 4}
    assert q.sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor", None)


def test_bytes_data_state_and_keep_last_k(tmp_path):
    model = Transformer(CFG, nnx.Rngs(0))
    ckpt = Checkpointer(tmp_path / "ckpt", keep=2)
    for step in (1, 2, 3):
        ckpt.save(step, model, None, jax.random.key(step), b"\x00\xffopaque")
    ckpt.close()
    ckpt = Checkpointer(tmp_path / "ckpt", keep=2)
    assert ckpt.all_steps() == [2, 3]
    restored = ckpt.restore(Transformer(CFG, nnx.Rngs(5)), step=2)
    assert restored.data_state == b"\x00\xffopaque"
    np.testing.assert_array_equal(jax.random.key_data(restored.rng), jax.random.key_data(jax.random.key(2)))


def test_shape_mismatch_names_the_parameter(tmp_path):
    ckpt = Checkpointer(tmp_path / "ckpt")
    ckpt.save(1, Transformer(CFG, nnx.Rngs(0)), None, jax.random.key(0))
    ckpt.wait()
    other = Transformer(CFG.replace(num_heads=8, head_dim=8), nnx.Rngs(0))
    with pytest.raises(InputError) as err:
        ckpt.restore(other)
    assert "parameter layers.attn.k: expected shape (2, 64, 2, 8), found (2, 64, 2, 16)" in str(err.value)
    assert "\n" not in str(err.value)


def test_no_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no checkpoint found"):
        Checkpointer(tmp_path / "empty").restore(Transformer(CFG, nnx.Rngs(0)))


def test_model_dir_round_trip_reward_model(tmp_path):
    model = RewardModel(CFG, nnx.Rngs(3))
    save_model_dir(tmp_path / "rm", model, CFG)
    loaded, cfg = load_model_from_checkpoint(tmp_path / "rm", mesh=make_mesh((1, 2, 4)))
    assert isinstance(loaded, RewardModel) and cfg == CFG
    tokens = jax.numpy.ones((2, 5), jax.numpy.int32)
    np.testing.assert_allclose(loaded(tokens), model(tokens), rtol=1e-6, atol=1e-6)


def test_load_model_from_trainer_checkpoint_root_and_step(tmp_path):
    root = tmp_path / "work" / "checkpoints"
    ckpt = Checkpointer(root)
    first, second = Transformer(CFG, nnx.Rngs(0)), Transformer(CFG, nnx.Rngs(1))
    ckpt.save(1, first, None, jax.random.key(0))
    ckpt.save(2, second, None, jax.random.key(0))
    ckpt.close()
    write_model_config(str(root), CFG)
    tokens = jax.numpy.ones((1, 4), jax.numpy.int32)
    latest, _ = load_model_from_checkpoint(tmp_path / "work")          # a trainer workdir -> latest step
    np.testing.assert_allclose(latest(tokens).logits, second(tokens).logits, rtol=1e-6)
    step1, _ = load_model_from_checkpoint(root / "1")                   # one step folder
    np.testing.assert_allclose(step1(tokens).logits, first(tokens).logits, rtol=1e-6)


def test_bad_model_config_file(tmp_path):
    (tmp_path / "model_config.json").write_text(json.dumps({"model_class": "transformer", "d_modle": 3}))
    with pytest.raises(InputError, match="field 'd_modle': not a ModelConfig field"):
        load_model_from_checkpoint(tmp_path)
