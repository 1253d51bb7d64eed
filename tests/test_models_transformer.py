"""Model behaviour: KV-cache decoding, packed segments, padding, the output dataclass, presets' parameter counts."""
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxwrite.models import KVCache, RewardModel, Transformer, TransformerOutput, get_preset


@pytest.fixture(scope="module")
def model():
    return Transformer(get_preset("tiny", vocab_size=128), nnx.Rngs(0))


def _tokens(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).integers(0, 128, size=shape), jnp.int32)


def test_cached_decoding_matches_full_forward(model):
    tokens = _tokens((2, 12))
    full = model(tokens).logits
    out = model(tokens[:, :5], cache=model.init_cache(2, 16))
    steps = [out.logits]
    for t in range(5, 12):
        out = model(tokens[:, t:t + 1], cache=out.cache)
        steps.append(out.logits)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=2e-5)
    assert out.cache.lengths.tolist() == [12, 12]


def test_ragged_prefill_with_right_padding(model):
    a, b = _tokens((1, 9), 1), _tokens((1, 4), 2)
    padded = jnp.concatenate([a, jnp.pad(b, ((0, 0), (0, 5)))], axis=0)
    mask = jnp.array([[1] * 9, [1] * 4 + [0] * 5], bool)
    out = model(padded, attention_mask=mask, cache=model.init_cache(2, 16))
    assert out.cache.lengths.tolist() == [9, 4]
    np.testing.assert_allclose(out.logits[1, :4], model(b).logits[0], atol=2e-5)
    # The next token of the short row attends only to its 4 real tokens.
    nxt = _tokens((2, 1), 3)
    step = model(nxt, cache=out.cache).logits
    expected = model(jnp.concatenate([b, nxt[1:]], axis=1)).logits[0, -1]
    np.testing.assert_allclose(step[1, 0], expected, atol=2e-5)


def test_packed_segments_do_not_attend_across_documents(model):
    a, b = _tokens((1, 6), 4), _tokens((1, 5), 5)
    packed = jnp.concatenate([a, b, jnp.zeros((1, 3), jnp.int32)], axis=1)
    seg = jnp.array([[1] * 6 + [2] * 5 + [0] * 3])
    logits = model(packed, segment_ids=seg).logits
    np.testing.assert_allclose(logits[0, :6], model(a).logits[0], atol=2e-5)
    np.testing.assert_allclose(logits[0, 6:11], model(b).logits[0], atol=2e-5)
    assert np.isfinite(np.asarray(logits)).all()


def test_blockwise_causal_attention_equals_full_attention(model, monkeypatch):
    """Sequences of >= 128 tokens attend by query blocks; with packed segments and padding the result
    equals one full [seq, seq] attention, and the prompt's cached prefill in two chunks agrees."""
    from jaxwrite.models import attention
    assert attention.causal_query_block(512) == 64 and attention.causal_query_block(100) is None
    tokens = _tokens((2, 256), 6)
    seg = jnp.array([[1] * 100 + [2] * 150 + [0] * 6, [1] * 256])
    blocked = model(tokens, segment_ids=seg).logits
    monkeypatch.setattr(attention, "causal_query_block", lambda seq: None)
    full = model(tokens, segment_ids=seg).logits
    np.testing.assert_allclose(blocked, full, atol=2e-5)
    # Cached prefill in two chunks agrees (the engine's chunked prefill: test_infer_engine.py).
    first = model(tokens[:, :128], cache=model.init_cache(2, 512), logits=False)
    second = model(tokens[:, 128:], cache=first.cache, logits=False)
    assert first.logits is None and second.cache.lengths.tolist() == [256, 256]
    logits = model.logits_from_hidden(jnp.concatenate([first.hidden, second.hidden], axis=1))
    np.testing.assert_allclose(logits[1], full[1], atol=2e-5)


def test_reward_model_reads_last_valid_token():
    rm = RewardModel(get_preset("tiny", vocab_size=128), nnx.Rngs(0))
    tokens = _tokens((2, 7))
    mask = jnp.array([[1] * 7, [1] * 4 + [0] * 3], bool)
    rewards = rm(tokens, mask)
    assert rewards.shape == (2,)
    np.testing.assert_allclose(rewards[1], rm(tokens[1:, :4])[0], atol=1e-5)


@pytest.mark.parametrize("name,billions", [("qwen2.5-0.5b", 0.494), ("qwen2.5-1.5b", 1.544), ("qwen2.5-7b", 7.616),
                                           ("qwen2.5-14b", 14.77), ("qwen2.5-32b", 32.76), ("qwen2.5-72b", 72.71),
                                           ("llama-3.1-8b", 8.030)])
def test_preset_parameter_counts_match_published_sizes(name, billions):
    assert get_preset(name).param_count() / 1e9 == pytest.approx(billions, rel=2e-3)


def test_flops_per_token_is_six_n_plus_attention():
    cfg = get_preset("qwen2.5-7b")
    n = cfg.param_count(include_embeddings=False) - cfg.d_model  # matmul weights (norms excluded below)
    flops = cfg.flops_per_token(4096)
    assert 6 * n * 0.99 < flops < 6 * cfg.param_count() * 1.2


def test_output_is_one_dataclass_whatever_the_arguments(model):
    """logits, hidden states and cache: always the same three fields (the cache None without one)."""
    tokens = _tokens((2, 6), 7)
    plain = model(tokens)
    cached = model(tokens, cache=model.init_cache(2, 8))
    assert isinstance(plain, TransformerOutput) and isinstance(cached, TransformerOutput)
    assert plain.cache is None and cached.cache.lengths.tolist() == [6, 6]
    assert plain.logits.shape == (2, 6, 128) and plain.hidden.shape == (2, 6, model.cfg.d_model)
    np.testing.assert_allclose(model.logits_from_hidden(plain.hidden), plain.logits, atol=1e-6)
    assert model(tokens, logits=False).logits is None


def test_kv_cache_shapes():
    cfg = get_preset("tiny")
    cache = KVCache.zeros(cfg, batch=3, max_len=32)
    assert cache.k.shape == (cfg.num_layers, 3, cfg.num_kv_heads, 32, cfg.dim_head)   # [L, B, K, S, H]
    assert cache.max_len == 32
