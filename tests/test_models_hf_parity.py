"""Hugging Face parity: tiny random Qwen2 / Llama / Qwen3 models built with transformers, saved,
loaded by jaxwrite, logits compared; the exported copy reloads in transformers with the same logits."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402

from jaxwrite.common.errors import InputError  # noqa: E402
from jaxwrite.models import load_hf, save_hf  # noqa: E402

BASE = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            max_position_embeddings=256, rms_norm_eps=1e-6)


def _build(kind: str, heads: int, kv_heads: int, tie: bool, **extra):
    torch.manual_seed(0)
    kw = dict(BASE, num_attention_heads=heads, num_key_value_heads=kv_heads, tie_word_embeddings=tie, **extra)
    if kind == "qwen2":
        cfg, cls = transformers.Qwen2Config(rope_theta=10000.0, **kw), transformers.Qwen2ForCausalLM
    elif kind == "llama":
        cfg, cls = transformers.LlamaConfig(**kw), transformers.LlamaForCausalLM
    else:
        cfg, cls = transformers.Qwen3Config(head_dim=16, **kw), transformers.Qwen3ForCausalLM
    model = cls(cfg).float().eval()
    with torch.no_grad():
        # Random biases and norm weights too, so every tensor's mapping is exercised.
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _torch_logits(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(tokens)).logits.float().numpy()


CASES = [
    ("qwen2", 4, 2, False, {}),
    ("qwen2", 4, 1, True, {}),                       # one KV head, tied embeddings
    ("qwen2", 4, 4, False, {}),                      # MHA
    ("llama", 4, 2, False, {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}),
    ("qwen3", 4, 2, True, {}),
]


@pytest.mark.parametrize("kind,heads,kv,tie,extra", CASES)
def test_logits_match_transformers(tmp_path, kind, heads, kv, tie, extra):
    hf_model = _build(kind, heads, kv, tie, **extra)
    # Small shards force a model.safetensors.index.json, as real multi-file checkpoints have.
    hf_model.save_pretrained(tmp_path / "hf", max_shard_size="20KB")
    assert (tmp_path / "hf" / "model.safetensors.index.json").exists()
    model = load_hf(str(tmp_path / "hf"))
    rng = np.random.default_rng(0)
    for shape in [(1, 7), (3, 19), (2, 64)]:
        tokens = rng.integers(0, BASE["vocab_size"], size=shape).astype(np.int32)
        ours = np.asarray(model(jnp.asarray(tokens)).logits)
        np.testing.assert_allclose(ours, _torch_logits(hf_model, tokens), atol=1e-4, rtol=0)

    save_hf(model, str(tmp_path / "export"))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export").float().eval()
    tokens = rng.integers(0, BASE["vocab_size"], size=(2, 11)).astype(np.int32)
    np.testing.assert_allclose(_torch_logits(reloaded, tokens), _torch_logits(hf_model, tokens), atol=1e-5)


def test_reward_model_matches_sequence_classification(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(num_attention_heads=4, num_key_value_heads=2, num_labels=1,
                                   pad_token_id=0, **BASE)
    hf_model = transformers.Qwen2ForSequenceClassification(cfg).float().eval()
    with torch.no_grad():
        for p in hf_model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf_model.save_pretrained(tmp_path / "rm")
    model = load_hf(str(tmp_path / "rm"))
    tokens = np.random.default_rng(1).integers(1, BASE["vocab_size"], size=(2, 9)).astype(np.int32)
    with torch.no_grad():
        expected = hf_model(torch.tensor(tokens)).logits[:, 0].numpy()
    np.testing.assert_allclose(np.asarray(model(jnp.asarray(tokens))), expected, atol=1e-4)


def test_bad_directories_fail_with_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="missing config.json"):
        load_hf(str(tmp_path))
    hf_model = _build("qwen2", 4, 2, False)
    hf_model.save_pretrained(tmp_path / "m")
    cfg_path = tmp_path / "m" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg_path.write_text(json.dumps(dict(cfg, model_type="gpt2")))
    with pytest.raises(InputError, match="unsupported model_type 'gpt2'"):
        load_hf(str(tmp_path / "m"))
    cfg_path.write_text(json.dumps(dict(cfg, intermediate_size=64)))
    with pytest.raises(InputError, match=r"layers\.0\.mlp\.\w+_proj\.weight': expected shape \(\d+, \d+\), found"):
        load_hf(str(tmp_path / "m"))
    cfg_path.write_text(json.dumps(cfg))
    os.remove(tmp_path / "m" / "model.safetensors")
    with pytest.raises(InputError, match="no \\*.safetensors"):
        load_hf(str(tmp_path / "m"))
