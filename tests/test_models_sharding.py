"""The same forward/backward gives the same numbers on 8 simulated devices under different meshes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxwrite.models import Transformer, get_preset
from jaxwrite.parallel import make_mesh, resolve_mesh_shape, shard_model, use_mesh_rules, logical_to_spec


def _loss_and_grads(mesh_shape):
    cfg = get_preset("tiny", vocab_size=256, num_heads=4, num_kv_heads=2)
    model = Transformer(cfg, nnx.Rngs(0))
    mesh = make_mesh(mesh_shape)
    shard_model(model, mesh)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 256, size=(8, 16)), jnp.int32)

    def loss_fn(model):
        logits = model(tokens[:, :-1]).logits
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))

    with use_mesh_rules(mesh):
        loss, grads = nnx.jit(nnx.value_and_grad(loss_fn))(model)
    flat = {k: np.asarray(v.get_value()) for k, v in nnx.to_flat_state(grads)}
    q = nnx.state(model)["layers"]["attn"]["q"].get_value()
    return float(loss), flat, q.sharding


@pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 (simulated) devices")
def test_same_numbers_under_different_meshes():
    ref_loss, ref_grads, _ = _loss_and_grads((8, 1, 1))
    for shape in [(2, 4, 1), (1, 2, 4)]:
        loss, grads, sharding = _loss_and_grads(shape)
        assert abs(loss - ref_loss) < 1e-5
        for key, g in ref_grads.items():
            np.testing.assert_allclose(grads[key], g, atol=1e-5, err_msg=str(key))
    # The (1, 2, 4) run really sharded the q projection: [layers, embed, heads, head_dim].
    assert sharding.spec[1:3] == ("fsdp", "tensor")


def test_mesh_shape_auto_fill_and_errors():
    assert resolve_mesh_shape((1, -1, 1), 8) == (1, 8, 1)
    assert resolve_mesh_shape({"tensor": 2}, 8) == (1, 4, 2)
    with pytest.raises(ValueError, match="needs 6 devices"):
        resolve_mesh_shape((2, 3, 1), 8)
    with pytest.raises(ValueError, match="at most one"):
        resolve_mesh_shape((-1, -1, 1), 8)


@pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 (simulated) devices")
def test_axis_that_does_not_divide_stays_replicated():
    mesh = make_mesh((1, 2, 4))
    # 2 KV heads cannot be split 4 ways: that dimension stays replicated instead of failing.
    spec = logical_to_spec(("embed", "kv_heads", "head_dim"), (64, 2, 16), mesh)
    assert tuple(spec) == ("fsdp", None, None)
