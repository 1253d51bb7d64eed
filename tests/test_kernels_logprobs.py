"""Token log-prob / entropy kernels: every implementation against the full-logits reference."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxwrite.kernels import LOGPROB_IMPLS, resolve_impl, token_logprobs

TILED = ["chunked", "pallas"]


def _problem(n=64, d=32, v=300, dtype=jnp.float32, seed=0):
    k = jax.random.split(jax.random.key(seed), 5)
    h = jax.random.normal(k[0], (n, d)).astype(dtype)  # [N, D]
    w = (0.4 * jax.random.normal(k[1], (d, v))).astype(dtype)  # [D, V]
    ids = jax.random.randint(k[2], (n,), 0, v)
    g_logp = jax.random.normal(k[3], (n,))
    g_ent = jax.random.normal(k[4], (n,))
    return h, w, ids, g_logp, g_ent


def _outputs_and_grads(impl, h, w, ids, g_logp, g_ent, temperature, **blocks):
    def objective(h, w):
        logp, ent = token_logprobs(h, w, ids, temperature=temperature, impl=impl, **blocks)
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


def test_pallas_compiled_mode_is_refused_off_tpu():
    h, w, ids, _, _ = _problem(n=16, v=128)
    with pytest.raises(ValueError, match="use impl='chunked'"):
        LOGPROB_IMPLS.get("pallas")(h, w, ids, 1.0, 16, 128, interpret=False)
