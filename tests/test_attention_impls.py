"""Every attention implementation against the reference: causal, padding, packed segments, GQA,
forward and gradients in float32; the cache pass (prefill chunks, decode steps) against the direct
formula; a whole model with model.attention set; and that the blockwise paths never build an array
the size of the score matrix."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxwrite.models import KVCache, Transformer, get_preset
from jaxwrite.models import attention as attn
from jaxwrite.models import attention_cache
from jaxwrite.models.attention_kernels import splash_attention
from jaxwrite.models.attention_cache import cache_attention
from jaxwrite.models.attention_mask import self_attention_mask

TOL = dict(atol=1e-5, rtol=1e-5)
BATCH, SEQ, HEADS, KV_HEADS, HD = 2, 96, 4, 2, 16


def _qkv(seq=SEQ, hd=HD, seed=0):
    r = np.random.default_rng(seed)
    q = r.normal(size=(BATCH, seq, HEADS, hd)).astype(np.float32)
    k = r.normal(size=(BATCH, KV_HEADS, seq, hd)).astype(np.float32)      # [B, K, S, H]
    v = r.normal(size=(BATCH, KV_HEADS, seq, hd)).astype(np.float32)
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
    ref = functools.partial(attn.attend, mask=mask, impl="reference")
    out, expected = fn(q, k, v), ref(q, k, v)
    np.testing.assert_allclose(out * valid[:, :, None, None], expected * valid[:, :, None, None], **TOL)
    grads = jax.grad(_loss, argnums=(1, 2, 3))(fn, q, k, v, valid)
    expected_grads = jax.grad(_loss, argnums=(1, 2, 3))(ref, q, k, v, valid)
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g, e, **TOL)


# Many blocks, a padded last block (96 = 2 x 40 + 16), one block.
@pytest.mark.parametrize("case,block", [(0, 16), (1, 40), (2, 16), (0, 512)],
                         ids=["causal-16", "padding-40", "packed-16", "causal-one-block"])
def test_blockwise_matches_reference(case, block):
    _, am, seg = _masks()[case]
    mask = self_attention_mask(jnp.asarray(am), None if seg is None else jnp.asarray(seg))
    fn = jax.jit(functools.partial(attn.attend, mask=mask, impl="blockwise", block=block))
    _check_against_reference(fn, mask, jnp.asarray(am), *_qkv())


def test_splash_kernel_matches_reference_in_interpreter():
    """The TPU kernel itself, run by the Pallas interpreter on CPU (the same code Mosaic compiles in
    test_attention_tpu_compile.py): 256 tokens in 128-token blocks, packed segments, head_dim 128, GQA."""
    seq = 256
    _, am, seg = _masks(seq)[2]
    mask = self_attention_mask(jnp.asarray(am), None if seg is None else jnp.asarray(seg))
    fn = jax.jit(functools.partial(splash_attention, mask=mask, block=128, interpret=True))
    _check_against_reference(fn, mask, jnp.asarray(am), *_qkv(seq, hd=128))


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN attention needs a GPU")
def test_cudnn_matches_reference():
    _, am, _ = _masks()[1]
    mask = self_attention_mask(jnp.asarray(am))
    q, k, v = (x.astype(jnp.bfloat16) for x in _qkv(hd=64))
    out = attn.attend(q, k, v, mask, "cudnn")
    expected = attn.attend(q, k, v, mask, "reference")
    valid = jnp.asarray(am)[:, :, None, None]
    np.testing.assert_allclose((out * valid).astype(np.float32), (expected * valid).astype(np.float32), atol=2e-2)


def _cache(lengths, keys: int, seed: int = 3) -> KVCache:
    """A one-layer cache of `keys` slots holding random keys / values, rows filled to `lengths`."""
    r = np.random.default_rng(seed)
    shape = (1, BATCH, KV_HEADS, keys, HD)                                          # [L, B, K, S, H]
    return KVCache(jnp.asarray(r.normal(size=shape), jnp.float32), jnp.asarray(r.normal(size=shape), jnp.float32),
                   jnp.asarray(lengths, jnp.int32))


@pytest.mark.parametrize("fills", [(50, 9), (50, 37)], ids=["no-shared-block", "two-shared-blocks"])
@pytest.mark.parametrize("seq", [1, 7, 40], ids=["decode", "short-chunk", "long-chunk"])
def test_cache_attention_matches_the_direct_formula(seq, fills):
    """New tokens after rows filled to `fills` slots of a 128-slot cache, in 16-slot key blocks (and
    16-query blocks for the long chunk): each attends its row's filled slots and, causally, the call's
    valid tokens; slots past a row's fill (stale keys here) and the padded tail of row 1 are never read.
    With fills 50 and 37 a chunk reads its first two key blocks, filled in both rows, without a mask."""
    keys, r = 128, np.random.default_rng(4)
    lengths = np.array(fills)
    cache = _cache(lengths, keys)
    am = np.ones((BATCH, seq), bool)
    am[1, seq // 2 + 1:] = False
    mask = self_attention_mask(jnp.asarray(am))
    q = jnp.asarray(r.normal(size=(BATCH, seq, KV_HEADS, HEADS // KV_HEADS, HD)), jnp.float32)
    k, v = (jnp.asarray(r.normal(size=(BATCH, KV_HEADS, seq, HD)), jnp.float32) for _ in range(2))
    out = jax.jit(lambda q, k, v, cache: cache_attention(q, k, v, mask, cache, 0, 16))(q, k, v, cache)
    # The direct formula over [cache slots ++ new tokens] with the mask written out.
    keys_all = jnp.concatenate([cache.k[0], k], axis=2)                            # [B, K, S + T, H]
    values_all = jnp.concatenate([cache.v[0], v], axis=2)
    filled = np.arange(keys)[None, None, :] < lengths[:, None, None]                # [B, 1, S]
    own = np.tril(np.ones((seq, seq), bool))[None] & am[:, None, :]                 # [B, T, T]
    dense = np.concatenate([np.broadcast_to(filled, (BATCH, seq, keys)), own], axis=2)
    expected = attn._attend(q, keys_all, values_all, jnp.asarray(dense), jnp.float32)
    valid = am[:, :, None, None, None]
    np.testing.assert_allclose(np.asarray(out) * valid, np.asarray(expected) * valid, **TOL)


def test_cache_attention_reads_only_filled_key_blocks(monkeypatch):
    """The loop over cache key blocks runs ceil(max fill / block) times: a call past an empty cache runs
    none, one after rows filled to 40 and 3 slots of 16-slot blocks runs 3."""
    trips = []
    real = attention_cache.filled_blocks

    def counted(lengths, block):
        n = real(lengths, block)
        jax.debug.callback(lambda n: trips.append(int(n)), n)
        return n
    monkeypatch.setattr(attention_cache, "filled_blocks", counted)
    q = jnp.ones((BATCH, 1, KV_HEADS, HEADS // KV_HEADS, HD))
    k = jnp.ones((BATCH, KV_HEADS, 1, HD))
    mask = self_attention_mask(jnp.ones((BATCH, 1), bool))
    for lengths in ([0, 0], [40, 3]):
        cache_attention(q, k, k, mask, _cache(lengths, 128), 0, 16).block_until_ready()
    assert trips == [0, 3]


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
    4,096-slot cache: no score row wider than one 256-slot key block."""
    seq, block = 512, 32
    q, k, v = _qkv(seq)
    mask = self_attention_mask(jnp.ones((BATCH, seq), bool))
    scores = BATCH * HEADS * seq * seq
    grad = lambda impl: jax.grad(lambda q, k, v: attn.attend(q, k, v, mask, impl, block).sum(),
                                 argnums=(0, 1, 2))
    largest = lambda impl: max(int(np.prod(s)) for s in _shapes(grad(impl), q, k, v))
    assert largest("reference") >= scores // 8
    assert largest("blockwise") < scores // 4
    cache = _cache([4000, 17], 4096)
    step = lambda q, k, v: cache_attention(q, k, v, self_attention_mask(jnp.ones((BATCH, 1), bool)), cache, 0, 256)
    qg = q[:, :1].reshape(BATCH, 1, KV_HEADS, HEADS // KV_HEADS, HD)
    groups = HEADS // KV_HEADS
    score_rows = [s for s in _shapes(step, qg, k[:, :, :1], v[:, :, :1]) if len(s) == 4 and s[2] == groups]
    assert max(s[-1] for s in score_rows) == 256                    # [B, K, G x 1 query, one key block]


def _model(attention: str, block: int = 16) -> Transformer:
    cfg = get_preset("tiny", vocab_size=128).replace(attention=attention, attention_block=block)
    return Transformer(cfg, nnx.Rngs(0))   # same seed: same weights whatever the attention


def test_model_with_blockwise_attention_equals_reference():
    """The tiny model (GQA 4/2 heads): packed + padded forward, its parameter gradients, and cached
    prefill + decode, with model.attention=blockwise against reference."""
    r = np.random.default_rng(1)
    tokens = jnp.asarray(r.integers(0, 128, size=(2, 48)), jnp.int32)
    seg = jnp.asarray([[1] * 20 + [2] * 24 + [0] * 4, [1] * 48])
    valid = (seg != 0)[:, :, None]

    @nnx.jit
    def run(model):
        def loss(model):
            logits = model(tokens, segment_ids=seg).logits
            return jnp.sum(jax.nn.log_softmax(logits)[..., 0] * valid[..., 0]), logits
        (_, logits), grads = nnx.value_and_grad(loss, has_aux=True)(model)
        prefill = model(tokens[:, :29], cache=model.init_cache(2, 64))
        step = model(tokens[:, 29:30], cache=prefill.cache)
        return logits, grads, jnp.concatenate([prefill.logits, step.logits], axis=1)

    got, expected = run(_model("blockwise")), run(_model("reference"))
    np.testing.assert_allclose(got[0] * valid, expected[0] * valid, **TOL)
    for a, b in zip(jax.tree.leaves(got[1]), jax.tree.leaves(expected[1])):
        # 1e-5 per unit of the leaf's scale: the tied embedding's gradient reaches ~80, where one float32
        # ulp is ~1e-5 and the two paths' different summation orders differ by a few.
        np.testing.assert_allclose(a, b, atol=1e-5 * max(1.0, float(np.abs(b).max())), rtol=1e-4)
    np.testing.assert_allclose(got[2], expected[2], **TOL)


def test_auto_picks_by_platform_and_length():
    short = self_attention_mask(jnp.ones((1, 256), bool))
    long = self_attention_mask(jnp.ones((1, attn.LONG_KEYS), bool))
    packed = self_attention_mask(jnp.ones((1, 256), bool), jnp.ones((1, 256), jnp.int32))
    pick = lambda mask, platform, dtype=jnp.bfloat16, hd=128: attn.resolve_attention("auto", mask, dtype, hd, platform)
    assert pick(short, "cpu") == "reference" and pick(long, "cpu") == "blockwise"
    assert pick(short, "tpu") == "splash" and pick(short, "tpu", hd=16) == "reference"
    assert pick(short, "gpu") == "cudnn" and pick(short, "gpu", jnp.float32) == "reference"
    assert pick(packed, "gpu") == "reference"     # packed rows would need a dense mask for cuDNN


def test_bad_attention_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="attention 'flash': expected one of auto, reference, blockwise"):
        get_preset("tiny").replace(attention="flash")
    with pytest.raises(ValueError, match="'splash' needs a TPU, found cpu; use auto or blockwise"):
        attn.resolve_attention("splash", self_attention_mask(jnp.ones((1, 8), bool)), jnp.float32, 16, "cpu")
