"""`jaxwrite convert` round trip: HF dir -> jaxwrite model dir -> HF dir that transformers loads."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from jaxwrite.cli import main  # noqa: E402


def test_convert_round_trip_keeps_logits(tmp_path, capsys):
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    hf_model = transformers.Qwen2ForCausalLM(cfg).float().eval()
    hf_model.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "generation_config.json").write_text('{"eos_token_id": [3, 4]}')
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "jw")]) == 0
    assert (tmp_path / "jw" / "model_config.json").exists()
    assert (tmp_path / "jw" / "tokenizer" / "generation_config.json").exists()
    assert main(["convert", str(tmp_path / "jw"), str(tmp_path / "back")]) == 0
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "back").float().eval()
    tokens = torch.tensor(np.arange(20).reshape(2, 10) % 64)
    with torch.no_grad():
        np.testing.assert_allclose(back(tokens).logits.numpy(), hf_model(tokens).logits.numpy(), atol=1e-5)
    assert (tmp_path / "back" / "generation_config.json").exists()


def test_convert_refuses_non_empty_destination(tmp_path, capsys):
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "x").write_text("x")
    (tmp_path / "src").mkdir()
    assert main(["convert", str(tmp_path / "src"), str(tmp_path / "dst")]) == 2
    assert "not empty" in capsys.readouterr().err


def test_model_info_lists_presets(capsys):
    assert main(["model", "info", "qwen2.5-7b", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"params": 7615616512' in out
