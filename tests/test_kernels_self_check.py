"""A log-prob kernel checks itself on a new device kind before `auto` trusts it (issue 29): value and
gradient against the chunked path on a small case, the verdict cached per device kind and version, and
a deliberately wrong kernel sent back to "chunked" with one warning. The check runs only where a kernel
runs for real, so here (CPU) it is forced, or `auto` is made to believe it runs on a TPU."""
import warnings

import jax.numpy as jnp
import pytest

from jaxwrite.common import building_for
from jaxwrite.kernels import LOGPROB_IMPLS, resolve_impl
from jaxwrite.kernels import _self_check as check


def _wrong(calls):
    """The reference with a wrong gradient: right values, dh scaled by 3 (a custom VJP gone wrong)."""
    import jax

    reference = LOGPROB_IMPLS.get("reference")

    @jax.custom_vjp
    def fn(h, w, ids):
        return reference(h, w, ids)

    def fwd(h, w, ids):
        (logp, ent), vjp = jax.vjp(lambda h, w: reference(h, w, ids), h, w)
        return (logp, ent), vjp

    def bwd(vjp, cotangents):
        dh, dw = vjp(cotangents)
        return 3.0 * dh, dw, None

    fn.defvjp(fwd, bwd)

    def impl(h, w, ids, temperature=1.0, block_tokens=None, block_vocab=None):
        calls.append(1)
        return fn(h, w, ids)
    return impl


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(check, "_VERDICTS", {})
    monkeypatch.setattr(check, "CHECK_SHAPE", (64, 32, 384))    # small: seconds on CPU


def test_a_wrong_kernel_falls_back_once_and_the_verdict_is_cached(monkeypatch):
    calls = []
    wrong, chunked = _wrong(calls), LOGPROB_IMPLS.get("chunked")
    with pytest.warns(UserWarning, match=r"'wrong' log-prob kernel disagrees with the chunked path .*dh"):
        assert check.verified_impl("wrong", wrong, chunked, force=True) == "chunked"
    ran = len(calls)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no second warning, no second run
        assert check.verified_impl("wrong", wrong, chunked, force=True) == "chunked"
        monkeypatch.setattr(check, "_VERDICTS", {})     # a new process: the verdict comes from the cache file
        assert check.verified_impl("wrong", wrong, chunked, force=True) == "chunked"
    assert len(calls) == ran
    errors = check._read_cache()[check.device_key("wrong")]["errors"]
    assert errors["logp"] < 1e-5 and errors["dh"] > 1     # the values agree; the gradient does not


def test_a_right_kernel_passes_its_check():
    pallas = LOGPROB_IMPLS.get("pallas")                # interpret mode here, with blocks that fit the case
    errors = check.compare(lambda h, w, ids, t, bt, bv: pallas(h, w, ids, t, 32, 128), LOGPROB_IMPLS.get("chunked"))
    assert max(errors.values()) < 1e-4
    assert check.verified_impl("reference", LOGPROB_IMPLS.get("reference"), LOGPROB_IMPLS.get("chunked"),
                               force=True) == "reference"


def test_auto_on_a_tpu_checks_the_pallas_kernel_first(monkeypatch):
    import jax
    import numpy as np

    from jaxwrite.kernels import token_logprobs

    calls = []
    monkeypatch.setitem(LOGPROB_IMPLS._entries, "pallas", _wrong(calls))
    monkeypatch.setattr(check, "running_backend", lambda: "tpu")
    h, w, ids = jnp.ones((8, 32)), 0.1 * jnp.ones((32, 384)), jnp.arange(8)
    with building_for("tpu"):
        # First use inside a step being traced: the check runs then and there, the step gets "chunked".
        with pytest.warns(UserWarning, match="using 'chunked' instead"):
            logp, _ = jax.jit(lambda h, w: token_logprobs(h, w, ids))(h, w)
        assert calls and resolve_impl("auto") == "chunked"
        np.testing.assert_allclose(logp, token_logprobs(h, w, ids, impl="reference")[0], rtol=1e-5)
        monkeypatch.setattr(check, "running_backend", lambda: "cpu")    # an AOT compile on a CPU host: no check
        assert resolve_impl("auto") == "pallas"


def test_tokens_that_do_not_divide_the_mesh_are_padded_not_gathered():
    import jax
    import numpy as np

    from jaxwrite.kernels import token_logprobs
    from jaxwrite.parallel import make_mesh, use_mesh_rules

    mesh = make_mesh((8, 1, 1))
    k = jax.random.split(jax.random.key(0), 3)
    h, w = jax.random.normal(k[0], (13, 16)), 0.3 * jax.random.normal(k[1], (16, 40))   # 13 tokens, 8 devices
    ids = jax.random.randint(k[2], (13,), 0, 40)

    def loss(h, w):
        logp, ent = token_logprobs(h, w, ids, impl="chunked")
        return jnp.sum(logp) + 0.5 * jnp.sum(ent)

    with use_mesh_rules(mesh):
        assert "shard_map" in str(jax.make_jaxpr(loss)(h, w))
        got = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(h, w)
    want = jax.value_and_grad(lambda h, w: loss(h, w), argnums=(0, 1))(h, w)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
