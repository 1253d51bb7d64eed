"""Every recipe under configs/ loads, takes overrides and validates for its hardware (no training)."""
import pytest

from jaxwrite.common import InputError, load_config
from jaxwrite.train import TARGETS, validate_config
from train_fixtures import REPO

QWEN_TOKENIZER_VOCAB = 151665
REAL = {
    "cpt_qwen2.5_32b_32k.py": ("v5p-128", "v6e-256", "gpu"),
    "critic_sft_qwen2.5_7b.py": ("v5p-32", "v6e-16", "gpu"),
    "rm_qwen2.5_72b.py": ("v5p-128", "v6e-256", "gpu"),
    "grpo_longwriter_zero_32b.py": ("v5p-128", "v6e-256", "gpu"),
    "writer_sft_qwen2.5_7b.py": ("v5p-32", "v4-32", "gpu"),
    "writer_sft_llama3.1_8b.py": ("v5p-32", "v4-32", "gpu"),
}


@pytest.mark.parametrize("name,hardware", [(n, h) for n, hs in REAL.items() for h in hs])
def test_real_size_recipes_validate(name, hardware):
    config = load_config(f"{REPO / 'configs' / name}:{hardware}")
    cfg = validate_config(config, TARGETS[hardware].devices, QWEN_TOKENIZER_VOCAB)
    assert cfg.vocab_size >= QWEN_TOKENIZER_VOCAB and cfg.dtype == "bfloat16" and cfg.remat == "full"
    if hardware != "gpu":
        assert cfg.param_count() > 7e9
    if name.startswith("cpt") and hardware != "gpu":
        assert config.data.seq_len == 32768 and cfg.num_layers == 64
    if name.startswith("grpo") and hardware != "gpu":   # the paper's settings
        rl = config.rl
        assert (rl.prompts_per_step, rl.group_size, rl.max_new_tokens, rl.temperature, rl.top_p, rl.eps_low,
                rl.beta, rl.advantage) == (32, 32, 14000, 0.8, 1.0, 0.2, 0.0, "longwriter_zero")


@pytest.mark.parametrize("name", ["cpt_tiny.py", "critic_sft_tiny.py", "rm_tiny.py", "grpo_tiny.py"])
@pytest.mark.parametrize("devices", [1, 8])
def test_tiny_recipes_validate_and_override(name, devices):
    config = load_config(str(REPO / "configs" / name), ["--config.num_steps=40", "--config.checkpoint_every=7",
                                                        "--config.log_every=2", "--config.data_dir=/x"])
    assert (config.num_steps, config.checkpoint_every, config.log_every, config.data_dir) == (40, 7, 2, "/x")
    assert validate_config(config, devices, 4096).d_model == 64


def test_unknown_hardware_and_bad_batch_are_one_line_errors():
    with pytest.raises(InputError, match="unknown hardware target 'v7x'"):
        load_config(f"{REPO / 'configs' / 'rm_qwen2.5_72b.py'}:v7x")
    config = load_config(str(REPO / "configs" / "cpt_tiny.py"), ["--config.grad_accum_steps=3"])
    with pytest.raises(InputError, match="field 'data.batch_size': batch_size 8 is not divisible by grad_accum_steps 3"):
        validate_config(config, 1, 4096)


@pytest.mark.parametrize("name", ["grpo_smollm2.py", "rm_smollm2_degraded.py"])
def test_real_weight_recipes_take_the_pinned_checkpoints_shape(name, smollm2_gguf):
    """The SmolLM2 recipes name no preset: the architecture is the pinned checkpoint's own."""
    config = load_config(str(REPO / "configs" / name), ["--config.data_dir=/x"])
    assert config.model.init_from == "pinned:smollm2-135m-instruct" and not config.model.preset
    cfg = validate_config(config, 1, 49152)
    assert (cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads) == (576, 30, 9, 3)
