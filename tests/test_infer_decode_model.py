"""The engine's two decoding layouts (layer scan; unrolled per-layer weights and caches) against the
model's own cached forward: windowed prefill chunks, then decode steps with identical greedy tokens."""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxwrite.infer import steps
from jaxwrite.infer.decode_model import DecodeModel
from jaxwrite.models import Transformer, get_preset


def _run(decoder: DecodeModel, tokens, mask, chunks):
    """Prefills tokens [batch, seq] in (start, chunk) pieces, then 6 greedy decode steps."""
    batch = tokens.shape[0]
    cache = decoder.empty_caches(decoder.model().cfg, batch, 64)
    hidden = []
    for start, chunk in chunks:
        h, cache = decoder.hidden_states(tokens[:, start:start + chunk], mask[:, start:start + chunk], cache)
        hidden.append(h)
    last = mask.sum(-1) - 1
    logits = decoder.logits(jnp.concatenate(hidden, axis=1))[jnp.arange(batch), last]     # [batch, vocab]
    rows = steps.Rows(token=jnp.argmax(logits, -1).astype(jnp.int32), done=jnp.zeros(batch, bool),
                      generated=jnp.ones(batch, jnp.int32), max_new=jnp.full(batch, 100, jnp.int32),
                      keys=jnp.zeros((batch, 2), jnp.uint32), temperature=jnp.zeros(batch),
                      top_p=jnp.ones(batch), top_k=jnp.zeros(batch, jnp.int32), cstate=jnp.zeros(batch, jnp.int32))
    tables = steps.Tables(jnp.zeros((1, 128), jnp.int32), jnp.zeros(1, jnp.int32), jnp.array([-1], jnp.int32))
    cache, rows, tokens_out, _, _ = steps.decode_chunk(decoder, cache, rows, tables, 6,
                                                    steps.Mode(sampled=False, constrained=False))
    return jnp.concatenate(hidden, axis=1), np.asarray(tokens_out).T, cache


def test_scanned_and_unrolled_layouts_agree_with_the_model():
    model = Transformer(get_preset("tiny", vocab_size=128), nnx.Rngs(0))
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 128, size=(2, 24)), jnp.int32)
    mask = jnp.array([[True] * 24, [True] * 13 + [False] * 11])
    graphdef, params = nnx.split(model)
    chunks = [(0, 16), (16, 8)]
    scan_h, scan_tokens, scan_cache = _run(DecodeModel.of(graphdef, params, unrolled=False), tokens, mask, chunks)
    unrolled = DecodeModel.of(graphdef, params, unrolled=True)
    assert len(unrolled.layer_params) == model.cfg.num_layers
    roll_h, roll_tokens, roll_cache = _run(unrolled, tokens, mask, chunks)

    # The model's own cached forward (full cache width) gives the same hidden states.
    ref = model(tokens, attention_mask=mask, cache=model.init_cache(2, 64)).hidden
    valid = np.asarray(mask)
    np.testing.assert_allclose(np.asarray(scan_h)[valid], np.asarray(ref)[valid], atol=2e-5)
    np.testing.assert_allclose(np.asarray(roll_h)[valid], np.asarray(ref)[valid], atol=2e-5)

    assert (scan_tokens == roll_tokens).all()
    assert len(scan_cache) == 1 and len(roll_cache) == model.cfg.num_layers
    np.testing.assert_array_equal(scan_cache[0].lengths, [24 + 6, 13 + 6])
    stacked = jnp.concatenate([c.k for c in roll_cache], axis=0)     # [layers, batch, kv_heads, slots, hd]
    np.testing.assert_allclose(stacked, scan_cache[0].k, atol=2e-5)
    assert jax.tree.structure(roll_cache[0]) == jax.tree.structure(scan_cache[0])


def _compiled_decode(decoder: DecodeModel, cfg, batch: int, slots: int):
    caches = decoder.empty_caches(cfg, batch, slots)
    rows = steps.Rows(token=jnp.zeros(batch, jnp.int32), done=jnp.zeros(batch, bool),
                      generated=jnp.zeros(batch, jnp.int32), max_new=jnp.full(batch, 100, jnp.int32),
                      keys=jnp.zeros((batch, 2), jnp.uint32), temperature=jnp.zeros(batch), top_p=jnp.ones(batch),
                      top_k=jnp.zeros(batch, jnp.int32), cstate=jnp.zeros(batch, jnp.int32))
    tables = steps.Tables(jnp.zeros((1, cfg.vocab_size), jnp.int32), jnp.zeros(1, jnp.int32), jnp.array([-1], jnp.int32))
    compiled = steps.decode_chunk.lower(decoder, caches, rows, tables, 4,
                                        steps.Mode(sampled=False, constrained=False)).compile()
    return compiled.memory_analysis(), sum(c.k.nbytes + c.v.nbytes for c in caches)


def test_decode_steps_update_the_cache_in_place():
    """The compiled decode chunk's output cache is its (donated) input cache, and its temporaries do not
    grow with the cache: no step copies the cache. The two caches (0.5 and 4 MiB) differ 8-fold; a
    program that copied the cache (the engine before issue 30 held two copies in temporaries) would need
    3.5 MiB more at the larger size, not the < 0.44 MiB allowed."""
    cfg = get_preset("tiny", vocab_size=128).replace(attention_block=64)   # one key block size for both
    graphdef, params = nnx.split(Transformer(cfg, nnx.Rngs(0)))
    for unrolled in (False, True):
        decoder = DecodeModel.of(graphdef, params, unrolled)
        small, small_bytes = _compiled_decode(decoder, cfg, 4, 256)
        large, large_bytes = _compiled_decode(decoder, cfg, 4, 2048)
        assert large_bytes == 8 * small_bytes == 4 * 2 ** 20
        assert large.alias_size_in_bytes >= large_bytes                  # the cache output aliases its input
        assert large.temp_size_in_bytes - small.temp_size_in_bytes < (large_bytes - small_bytes) / 8
