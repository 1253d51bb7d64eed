"""Every attention implementation against the reference: causal, padding, packed segments, GQA,
forward and gradients in float32; the cache (decode) path; a whole model with model.attention set;
and that the blockwise paths never build an array the size of the score matrix."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxwrite.models import Transformer, get_preset
from jaxwrite.models import attention as attn
from jaxwrite.models.attention_kernels import splash_attention
from jaxwrite.models.attention_mask import cache_attention_mask, self_attention_mask

TOL = dict(atol=1e-5, rtol=1e-5)
BATCH, SEQ, HEADS, KV_HEADS, HD = 2, 96, 4, 2, 16


def _qkv(seq=SEQ, hd=HD, seed=0):
    r = np.random.default_rng(seed)
    q = r.normal(size=(BATCH, seq, HEADS, hd)).astype(np.float32)
    k = r.normal(size=(BATCH, seq, KV_HEADS, hd)).astype(np.float32)
    v = r.normal(size=(BATCH, seq, KV_HEADS, hd)).astype(np.float32)
    return jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)


def _masks(seq=SEQ):
    """(name, attention_mask, segment_ids) cases: plain causal, right padding, packed + padding."""
    full = np.ones((BATCH, seq), bool)
    padded = full.copy()
    padded[1, seq * 2 // 3:] = False
    seg = np.zeros((BATCH, seq), np.int32)
    seg[0, :seq // 3], seg[0, seq // 3:seq - 5] = 1, 2            # two documents, 5 padding tokens
    seg[1, :seq // 2], seg[1, seq // 2:] = 3, 4
    return [("causal", full, None), ("padding", padded, None), ("packed", seg != 0, seg)]


def _loss(fn, q, k, v, valid):
    """A loss over the valid query rows only (padding rows are never read by any model)."""
    out = fn(q, k, v)
    w = jnp.sin(jnp.arange(out.size, dtype=jnp.float32).reshape(out.shape))
    return jnp.sum(out * w * valid[:, :, None, None])


def _check_against_reference(fn, mask, valid, q, k, v):
    ref = functools.partial(attn.attend, mask=mask, impl="reference", kv_layout="bskd")
    out, expected = fn(q, k, v), ref(q, k, v)
    np.testing.assert_allclose(out * valid[:, :, None, None], expected * valid[:, :, None, None], **TOL)
    grads = jax.grad(_loss, argnums=(1, 2, 3))(fn, q, k, v, valid)
    expected_grads = jax.grad(_loss, argnums=(1, 2, 3))(ref, q, k, v, valid)
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g, e, **TOL)


@pytest.mark.parametrize("case", [0, 1, 2], ids=["causal", "padding", "packed"])
@pytest.mark.parametrize("block", [16, 40, 512])   # many blocks, a padded last block, one block
def test_blockwise_matches_reference(case, block):
    _, am, seg = _masks()[case]
    mask = self_attention_mask(jnp.asarray(am), None if seg is None else jnp.asarray(seg))
    fn = jax.jit(functools.partial(attn.attend, mask=mask, impl="blockwise", block=block, kv_layout="bskd"))
    _check_against_reference(fn, mask, jnp.asarray(am), *_qkv())


@pytest.mark.parametrize("case", [0, 2], ids=["causal", "packed"])
def test_splash_kernel_matches_reference_in_interpreter(case):
    """The TPU kernel itself, run by the Pallas interpreter on CPU (the same code Mosaic compiles in
    test_attention_tpu_compile.py): 256 tokens in 128-token blocks, head_dim 128, GQA."""
    seq = 256
    _, am, seg = _masks(seq)[case]
    mask = self_attention_mask(jnp.asarray(am), None if seg is None else jnp.asarray(seg))
    fn = jax.jit(functools.partial(splash_attention, mask=mask, block=128, interpret=True))
    _check_against_reference(fn, mask, jnp.asarray(am), *_qkv(seq, hd=128))


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN attention needs a GPU")
def test_cudnn_matches_reference():
    _, am, _ = _masks()[1]
    mask = self_attention_mask(jnp.asarray(am))
    q, k, v = (x.astype(jnp.bfloat16) for x in _qkv(hd=64))
    out = attn.attend(q, k, v, mask, "cudnn", kv_layout="bskd")
    expected = attn.attend(q, k, v, mask, "reference", kv_layout="bskd")
    valid = jnp.asarray(am)[:, :, None, None]
    np.testing.assert_allclose((out * valid).astype(np.float32), (expected * valid).astype(np.float32), atol=2e-2)


@pytest.mark.parametrize("seq", [1, 7, 40], ids=["decode", "short-chunk", "long-chunk"])
def test_blockwise_cache_attention_matches_reference(seq):
    """New tokens written after rows of different lengths attend a 128-slot cache window in 16-slot
    key blocks (and 16-query blocks for the long chunk); the padded tail of row 1 is never attended."""
    keys, r = 128, np.random.default_rng(3)
    lengths = jnp.asarray([50, 9], jnp.int32)
    am = np.ones((BATCH, seq), bool)
    am[1, seq // 2 + 1:] = False
    mask = cache_attention_mask(lengths, jnp.asarray(am), keys)
    q = jnp.asarray(r.normal(size=(BATCH, seq, HEADS, HD)), jnp.float32)
    k = jnp.asarray(r.normal(size=(BATCH, KV_HEADS, keys, HD)), jnp.float32)   # a cache layer: bksd
    v = jnp.asarray(r.normal(size=(BATCH, KV_HEADS, keys, HD)), jnp.float32)
    out = jax.jit(functools.partial(attn.attend, mask=mask, impl="blockwise", block=16))(q, k, v)
    expected = attn.attend(q, k, v, mask, "reference")
    np.testing.assert_allclose(out * am[:, :, None, None], expected * am[:, :, None, None], **TOL)


def _shapes(fn, *args) -> list[tuple[int, ...]]:
    """Shapes of every array the equations of fn's jaxpr (sub-jaxprs included) produce."""
    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            for out in eqn.outvars:
                yield tuple(getattr(out.aval, "shape", ()))
            for p in eqn.params.values():
                for sub in p if isinstance(p, (tuple, list)) else (p,):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        yield from walk(inner)
    return list(walk(jax.make_jaxpr(fn)(*args).jaxpr))


def test_blockwise_never_builds_a_score_matrix():
    """Forward + backward of 512 tokens in 32-token blocks: no intermediate reaches a quarter of the
    full score matrix (the reference builds an eighth of it per query block). One decode step over a
    4,096-slot cache: no score row wider than one 256-slot key block (the reference's spans the cache)."""
    seq, block = 512, 32
    q, k, v = _qkv(seq)
    mask = self_attention_mask(jnp.ones((BATCH, seq), bool))
    scores = BATCH * HEADS * seq * seq
    grad = lambda impl: jax.grad(lambda q, k, v: attn.attend(q, k, v, mask, impl, block, "bskd").sum(),
                                 argnums=(0, 1, 2))
    largest = lambda impl: max(int(np.prod(s)) for s in _shapes(grad(impl), q, k, v))
    assert largest("reference") >= scores // 8
    assert largest("blockwise") < scores // 4
    keys = 4096
    cache_mask = cache_attention_mask(jnp.asarray([4000, 17], jnp.int32), jnp.ones((BATCH, 1), bool), keys)
    kc = jnp.zeros((BATCH, KV_HEADS, keys, HD))
    step = lambda impl: (lambda q, k, v: attn.attend(q, k, v, cache_mask, impl, 256))
    score_rows = lambda impl: [s for s in _shapes(step(impl), q[:, :1], kc, kc) if len(s) == 5 and s[3] == 1]
    assert max(s[-1] for s in score_rows("reference")) == keys      # [batch, kv, groups, 1, keys]
    assert max(s[-1] for s in score_rows("blockwise")) == 256


def _model(attention: str, block: int = 16) -> Transformer:
    cfg = get_preset("tiny", vocab_size=128).replace(attention=attention, attention_block=block)
    return Transformer(cfg, nnx.Rngs(0))   # same seed: same weights whatever the attention


def test_model_with_blockwise_attention_equals_reference():
    """The tiny model (GQA 4/2 heads): packed + padded forward, its parameter gradients, and cached
    prefill + decode, with model.attention=blockwise against reference."""
    ref, blk = _model("reference"), _model("blockwise")
    r = np.random.default_rng(1)
    tokens = jnp.asarray(r.integers(0, 128, size=(2, 80)), jnp.int32)
    seg = jnp.asarray([[1] * 30 + [2] * 45 + [0] * 5, [1] * 80])
    valid = (seg != 0)[:, :, None]
    np.testing.assert_allclose(blk(tokens, segment_ids=seg) * valid, ref(tokens, segment_ids=seg) * valid, **TOL)

    def loss(model):
        return jnp.sum(jax.nn.log_softmax(model(tokens, segment_ids=seg))[..., 0] * valid[..., 0])
    g_blk, g_ref = nnx.grad(loss)(blk), nnx.grad(loss)(ref)
    for a, b in zip(jax.tree.leaves(g_blk), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)

    def generate(model):
        cache = model.init_cache(2, 64)
        logits, cache = model(tokens[:, :37], cache=cache)
        steps = [logits]
        for t in range(37, 41):
            step, cache = model(tokens[:, t:t + 1], cache=cache)
            steps.append(step)
        return jnp.concatenate(steps, axis=1)
    np.testing.assert_allclose(generate(blk), generate(ref), **TOL)


def test_auto_picks_by_platform_and_length():
    short = self_attention_mask(jnp.ones((1, 256), bool))
    long = self_attention_mask(jnp.ones((1, attn.LONG_KEYS), bool))
    packed = self_attention_mask(jnp.ones((1, 256), bool), jnp.ones((1, 256), jnp.int32))
    decode = cache_attention_mask(jnp.zeros((1,), jnp.int32), jnp.ones((1, 1), bool), 2 * attn.LONG_KEYS)
    pick = lambda mask, platform, dtype=jnp.bfloat16, hd=128: attn.resolve_attention("auto", mask, dtype, hd, platform)
    assert pick(short, "cpu") == "reference" and pick(long, "cpu") == "blockwise"
    assert pick(short, "tpu") == "splash" and pick(short, "tpu", hd=16) == "reference"
    assert pick(short, "gpu") == "cudnn" and pick(short, "gpu", jnp.float32) == "reference"
    assert pick(packed, "gpu") == "reference"     # packed rows would need a dense mask for cuDNN
    assert pick(decode, "tpu") == "blockwise"      # no kernel takes per-row cache offsets
    assert attn.resolve_attention("splash", decode, jnp.bfloat16, 128, "tpu") == "blockwise"


def test_bad_attention_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="attention 'flash': expected one of auto, reference, blockwise"):
        get_preset("tiny").replace(attention="flash")
    with pytest.raises(ValueError, match="'splash' needs a TPU, found cpu; use auto or blockwise"):
        attn.resolve_attention("splash", self_attention_mask(jnp.ones((1, 8), bool)), jnp.float32, 16, "cpu")
