"""Token log-prob / entropy kernels: every implementation against the full-logits reference."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxwrite.kernels import LOGPROB_IMPLS, resolve_impl, token_logprobs
from jaxwrite.kernels._logprob_pallas import pallas_token_logprobs

# "pallas" picks the TPU (Mosaic) family on this host; "pallas_gpu" runs the Triton family, both in
# Pallas interpret mode.
TILED = ["chunked", "pallas", "pallas_gpu"]


def _logprobs(impl, h, w, ids, temperature, entropy_grad=True, **blocks):
    if impl == "pallas_gpu":
        return pallas_token_logprobs(h, w, ids, temperature, blocks.get("block_tokens"),
                                     blocks.get("block_vocab"), family="gpu", entropy_grad=entropy_grad)
    return token_logprobs(h, w, ids, temperature=temperature, impl=impl, entropy_grad=entropy_grad, **blocks)


def _problem(n=64, d=32, v=300, dtype=jnp.float32, seed=0):
    k = jax.random.split(jax.random.key(seed), 5)
    h = jax.random.normal(k[0], (n, d)).astype(dtype)  # [N, D]
    w = (0.4 * jax.random.normal(k[1], (d, v))).astype(dtype)  # [D, V]
    ids = jax.random.randint(k[2], (n,), 0, v)
    g_logp = jax.random.normal(k[3], (n,))
    g_ent = jax.random.normal(k[4], (n,))
    return h, w, ids, g_logp, g_ent


def _outputs_and_grads(impl, h, w, ids, g_logp, g_ent, temperature, entropy_grad=True, **blocks):
    def objective(h, w):
        logp, ent = _logprobs(impl, h, w, ids, temperature, entropy_grad, **blocks)
        return jnp.sum(g_logp * logp + g_ent * ent), (logp, ent)

    (_, (logp, ent)), (dh, dw) = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)(h, w)
    return logp, ent, dh, dw


def _rel_err(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return np.max(np.abs(x - ref)) / np.max(np.abs(ref))


@pytest.mark.parametrize("impl", TILED)
@pytest.mark.parametrize("n, v, blocks", [
    (64, 300, dict(block_tokens=16, block_vocab=128)),   # V padded to the vocab tile
    (37, 256, dict(block_tokens=16, block_vocab=128)),   # N padded to the token tile, V exact
    (24, 100, dict(block_tokens=8, block_vocab=128)),    # one vocab tile larger than V
])
def test_outputs_and_gradients_match_reference_fp32(impl, n, v, blocks):
    h, w, ids, g_logp, g_ent = _problem(n=n, v=v)
    want = _outputs_and_grads("reference", h, w, ids, g_logp, g_ent, 0.7)
    got = _outputs_and_grads(impl, h, w, ids, g_logp, g_ent, 0.7, **blocks)
    for name, x, ref in zip(["logp", "entropy", "dh", "dw"], got, want):
        assert x.shape == ref.shape and x.dtype == ref.dtype, name
        assert _rel_err(x, ref) < 1e-5, name


@pytest.mark.parametrize("impl", TILED + ["reference"])
def test_entropy_as_a_metric_gets_no_gradient(impl):
    # entropy_grad=False (the losses' setting): the entropy's value is unchanged, and dh, dW are the
    # gradients of g_logp . logp alone, whatever cotangent reaches the entropy.
    h, w, ids, g_logp, g_ent = _problem(n=37, v=300)
    blocks = dict(block_tokens=16, block_vocab=128) if impl != "reference" else {}
    want = _outputs_and_grads("reference", h, w, ids, g_logp, jnp.zeros_like(g_ent), 0.7)
    got = _outputs_and_grads(impl, h, w, ids, g_logp, g_ent, 0.7, entropy_grad=False, **blocks)
    for name, x, ref in zip(["logp", "entropy", "dh", "dw"], got, want):
        assert _rel_err(x, ref) < 1e-5, name
    with_entropy = _outputs_and_grads(impl, h, w, ids, g_logp, g_ent, 0.7, **blocks)
    assert _rel_err(with_entropy[2], got[2]) > 1e-3     # the entropy's term is real when asked for


def test_reference_matches_numpy_definition():
    h, w, ids, _, _ = _problem(n=8, v=50)
    logp, ent = token_logprobs(h, w, ids, temperature=1.3, impl="reference")
    logits = np.asarray(h, np.float64) @ np.asarray(w, np.float64) / 1.3
    log_probs = logits - np.log(np.sum(np.exp(logits - logits.max(1, keepdims=True)), 1, keepdims=True)) \
        - logits.max(1, keepdims=True)
    np.testing.assert_allclose(logp, log_probs[np.arange(8), np.asarray(ids)], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ent, -np.sum(np.exp(log_probs) * log_probs, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", TILED)
def test_bf16_inputs_accumulate_in_fp32(impl):
    h, w, ids, g_logp, g_ent = _problem(n=32, v=300, dtype=jnp.bfloat16)
    blocks = dict(block_tokens=16, block_vocab=128)
    want = _outputs_and_grads("reference", h, w, ids, g_logp, g_ent, 0.9)
    logp, ent, dh, dw = _outputs_and_grads(impl, h, w, ids, g_logp, g_ent, 0.9, **blocks)
    assert logp.dtype == ent.dtype == jnp.float32
    assert dh.dtype == dw.dtype == jnp.bfloat16
    # Same bf16 products, float32 sums: only the summation order differs.
    np.testing.assert_allclose(logp, want[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ent, want[1], rtol=1e-4, atol=1e-4)
    assert _rel_err(dh, want[2]) < 2e-2 and _rel_err(dw, want[3]) < 2e-2


def test_chunked_never_builds_full_logits():
    h, w, ids, _, _ = _problem(n=256, d=16, v=4096)
    f = jax.jit(jax.grad(lambda h, w: jnp.sum(token_logprobs(h, w, ids, impl="chunked", block_tokens=32,
                                                             block_vocab=256)[0]), argnums=(0, 1)))
    hlo = f.lower(h, w).as_text()
    assert "256x4096" not in hlo  # [N, V] never appears; the gradient itself is [D, V] = 16x4096


def test_jit_with_static_impl():
    h, w, ids, _, _ = _problem(n=16, v=200)
    f = jax.jit(functools.partial(token_logprobs, impl="chunked", block_tokens=8, block_vocab=128))
    np.testing.assert_allclose(f(h, w, ids)[0], token_logprobs(h, w, ids, impl="reference")[0], atol=1e-5)


def test_registry_and_auto():
    assert LOGPROB_IMPLS.names() == ["chunked", "pallas", "reference"]
    assert resolve_impl("auto", backend="cpu") == "chunked"
    assert resolve_impl("auto", backend="tpu") == "pallas"
    assert resolve_impl("auto", backend="gpu") == "chunked"
    assert resolve_impl("pallas") == "pallas"
    with pytest.raises(KeyError, match="expected one of: chunked, pallas, reference"):
        resolve_impl("triton")


def test_shape_mismatch_is_reported():
    h, w, ids, _, _ = _problem(n=8, v=50)
    with pytest.raises(ValueError, match=r"expected h \[N, D\], w \[D, V\]"):
        token_logprobs(h, w.T, ids)


def test_compiled_block_shapes_are_checked_per_family():
    h, w, ids, _, _ = _problem(n=16, d=32, v=128)
    with pytest.raises(ValueError, match="block_vocab % 128"):
        pallas_token_logprobs(h, w, ids, 1.0, 16, 96, interpret=False, family="tpu")
    with pytest.raises(ValueError, match="power-of-two"):
        pallas_token_logprobs(h, w, ids, 1.0, 24, 128, interpret=False, family="gpu")
    h_odd, w_odd, _, _, _ = _problem(n=16, d=40, v=128)
    with pytest.raises(ValueError, match="hidden size divisible by 16"):
        pallas_token_logprobs(h_odd, w_odd, ids, 1.0, 16, 128, interpret=False, family="gpu")
    with pytest.raises(ValueError, match="unknown Pallas kernel family"):
        pallas_token_logprobs(h, w, ids, family="cuda")


@pytest.mark.parametrize("family, platform, call", [("tpu", "tpu", "tpu_custom_call"),
                                                    ("gpu", "cuda", "__gpu$xla.gpu.triton")])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_kernels_lower_for_their_platform_at_qwen_shapes(family, platform, call, dtype):
    """Forward, dh and dW lower through Mosaic (TPU) and Triton (GPU) from this CPU host, at the
    Qwen2.5-0.5B head shape (D 896 is not a power of two; V 151,936 leaves a partial GPU tile)."""
    def loss(h, w, ids):
        logp, ent = pallas_token_logprobs(h, w, ids, 0.8, interpret=False, family=family)
        return jnp.sum(logp) + 0.1 * jnp.sum(ent)

    args = (jax.ShapeDtypeStruct((256, 896), dtype), jax.ShapeDtypeStruct((896, 151_936), dtype),
            jax.ShapeDtypeStruct((256,), jnp.int32))
    # Triton calls carry no serialisation-compatibility guarantee; lowering is what is checked here.
    checks = [jax.export.DisabledSafetyCheck.custom_call(call)] if family == "gpu" else []
    exported = jax.export.export(jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), platforms=[platform],
                                 disabled_checks=checks)(*args)
    module = exported.mlir_module()
    assert module.count(f"custom_call @{call}") == 3
    suffix = "_gpu" if family == "gpu" else ""
    for kernel in ("logprob_forward", "logprob_dh", "logprob_dw"):
        assert f'"{kernel}{suffix}"' in module, kernel


@pytest.mark.parametrize("impl", ["chunked", "pallas", "reference"])
@pytest.mark.parametrize("mesh_shape", [(2, 2, 2), (1, 4, 2), (8, 1, 1)])
def test_gradients_on_8_devices_equal_one_device_and_dw_stays_on_its_shards(impl, mesh_shape):
    # The trainer's path: tokens split over every device, the head sharded as the parameter is (embed
    # over fsdp, vocab over tensor). dW comes back through the gather's transpose (a reduce-scatter),
    # summed over all devices' tokens, on the head's own shards. 37 tokens: padded to the mesh.
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxwrite.parallel import DEFAULT_RULES, make_mesh, use_mesh_rules

    h, w, ids, g_logp, g_ent = _problem(n=37, d=32, v=256)
    blocks = dict(block_tokens=8, block_vocab=128) if impl != "reference" else {}
    want = jax.jit(functools.partial(_outputs_and_grads, impl, temperature=0.7, **blocks))(h, w, ids, g_logp, g_ent)
    mesh = make_mesh(mesh_shape)
    with use_mesh_rules(mesh, DEFAULT_RULES):
        w_sharded = jax.device_put(w, NamedSharding(mesh, P("fsdp", "tensor")))
        got = jax.jit(functools.partial(_outputs_and_grads, impl, temperature=0.7, **blocks))(
            h, w_sharded, ids, g_logp, g_ent)
    for name, x, ref in zip(["logp", "entropy", "dh", "dw"], got, want):
        assert _rel_err(x, ref) < 1e-5, (name, mesh_shape)
    dw = got[3]
    assert dw.sharding.shard_shape(dw.shape) == (32 // mesh_shape[1], 256 // mesh_shape[2]), dw.sharding


def test_head_gradient_barrier_only_inside_an_accumulation_loop():
    # The barrier that keeps the head's reduce-scatter inside the trainer's microbatch loop costs
    # memory where there is no loop (writer SFT 8B: 1.66 GiB per chip), so it appears only when the
    # trainer marks the gradient as accumulated (parallel.accumulating_gradients).
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxwrite.parallel import DEFAULT_RULES, accumulating_gradients, make_mesh, use_mesh_rules

    h, w, ids, g_logp, _ = _problem(n=32, d=32, v=256)
    mesh = make_mesh((1, 4, 2))

    def grad_jaxpr() -> str:
        def loss(w):
            return jnp.sum(g_logp * token_logprobs(h, w, ids, impl="chunked", entropy_grad=False)[0])
        return str(jax.make_jaxpr(jax.grad(loss))(w))

    with use_mesh_rules(mesh, DEFAULT_RULES):
        w = jax.device_put(w, NamedSharding(mesh, P("fsdp", "tensor")))
        plain = grad_jaxpr()
        with accumulating_gradients():
            accumulated = grad_jaxpr()
    assert "reduce_scatter" in plain and "reduce_scatter" in accumulated
    assert "optimization_barrier" not in plain
    assert "optimization_barrier" in accumulated
