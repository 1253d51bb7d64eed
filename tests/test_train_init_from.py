"""The checkpoint defines the model: `model.init_from` (a Hugging Face dir, a GGUF file, a jaxwrite
checkpoint) builds the architecture from the checkpoint's own config whatever the recipe's preset, starts
from its weights (a reward model from a language model's backbone), brings its own tokenizer, and a recipe
setting or tokenizer that contradicts it is one line naming both."""

import numpy as np
import optax
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from gguf_writer import write_gguf  # noqa: E402
from jaxwrite.checkpoint import load_model_from_checkpoint  # noqa: E402
from jaxwrite.cli import main as cli_main  # noqa: E402
from jaxwrite.common import InputError, load_config  # noqa: E402
from jaxwrite.models import RewardModel  # noqa: E402
from jaxwrite.parallel import DEFAULT_RULES, make_mesh  # noqa: E402
from jaxwrite.train import create_model_and_optimizer, model_config, train  # noqa: E402
from train_fixtures import REPO, llama_hf_dir, tiny_overrides, train_tokenizer, write_corpus  # noqa: E402

# Not the tiny preset's shape (d_model 64, 2 layers, 4/2 heads, d_ff 128): the checkpoint must win.
SHAPE = dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=96, max_position_embeddings=512, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(corpus root, SentencePiece dir, HF dir holding that tokenizer, GGUF of the same weights, HF model)."""
    root = tmp_path_factory.mktemp("init_from")
    write_corpus(root)
    hf_dir, tok, hf_model = llama_hf_dir(root, SHAPE)
    return root, tok, hf_dir, write_gguf(root / "m.gguf", hf_model, "llama"), hf_model


def _config(root, recipe="cpt_tiny.py", **extra):
    values = {"model.num_layers": 0, "num_steps": 1, "checkpoint_every": 1, "optimizer.learning_rate": 0.0,
              "eval_every": 0, **extra}
    overrides = [o for o in tiny_overrides(root, "") if not o.startswith(("--config.tokenizer.path",
                                                                          "--config.model.num_layers"))]
    return load_config(str(REPO / "configs" / recipe), overrides + [f"--config.{k}={v}" for k, v in values.items()])


def _same_logits(model, hf_model):
    tokens = np.arange(60, dtype=np.int32).reshape(2, 30) * 5 % 384
    with torch.no_grad():
        ref = hf_model(torch.tensor(tokens)).logits.numpy()
    np.testing.assert_allclose(np.asarray(model(jnp.asarray(tokens)).logits), ref, atol=1e-4, rtol=0)


def test_a_run_takes_the_checkpoints_architecture_weights_and_tokenizer(base, tmp_path):
    root, _, hf_dir, _, hf_model = base
    assert train(_config(root, **{"model.init_from": str(hf_dir)}), str(tmp_path / "w")) == 0
    model, cfg = load_model_from_checkpoint(tmp_path / "w")
    assert (cfg.d_model, cfg.num_layers, cfg.d_ff, cfg.vocab_size, cfg.model_type) == (48, 3, 96, 384, "llama")
    _same_logits(model, hf_model)                   # learning rate 0: still the checkpoint's weights
    # No tokenizer.path: the checkpoint's own tokenizer, stored with the run.
    assert (tmp_path / "w" / "checkpoints" / "tokenizer" / "tokenizer.model").exists()
    assert not list((tmp_path / "w" / "checkpoints" / "tokenizer").glob("*.safetensors"))   # not the weights


def test_a_gguf_file_and_a_reward_model_start_from_the_checkpoint(base):
    root, tok, hf_dir, gguf_path, hf_model = base
    mesh = make_mesh((1, -1, 1))
    # A GGUF file: architecture from its metadata, weights dequantized (F32 here: exact).
    cfg = model_config(_config(root, **{"model.init_from": gguf_path}).model, 320)
    model, _ = create_model_and_optimizer("transformer", cfg, optax.sgd(0.1), 0, mesh, DEFAULT_RULES,
                                          init_from=gguf_path)
    _same_logits(model, hf_model)
    # A reward model from a language model: the backbone is the checkpoint's, the head the seed's.
    cfg = model_config(_config(root, **{"model.init_from": str(hf_dir)}).model, None)
    model, _ = create_model_and_optimizer("reward_model", cfg, optax.sgd(0.1), 3, mesh, DEFAULT_RULES,
                                          init_from=str(hf_dir))
    assert isinstance(model, RewardModel)
    embed = hf_model.model.embed_tokens.weight.detach().numpy()
    np.testing.assert_array_equal(np.asarray(model.backbone.embed.get_value()), embed)
    up = hf_model.model.layers[2].mlp.up_proj.weight.detach().numpy().T
    np.testing.assert_array_equal(np.asarray(model.backbone.layers.mlp.up.get_value()[2]), up)
    seeded = RewardModel(cfg, nnx.Rngs(3)).score.get_value()
    np.testing.assert_allclose(np.asarray(model.score.get_value()), np.asarray(seeded), rtol=1e-6)


def test_compile_and_model_info_read_the_checkpoint(base, capsys):
    from jaxwrite.aot.abstract import recipe_model_config
    _, _, hf_dir, gguf_path, _ = base
    for init_from in (str(hf_dir), gguf_path):
        cfg = recipe_model_config(_config(base[0], **{"model.init_from": init_from,
                                                      "model.dtype": "bfloat16", "model.remat": "full"}))
        assert (cfg.d_model, cfg.num_layers, cfg.vocab_size, cfg.dtype, cfg.remat) == (48, 3, 384, "bfloat16", "full")
    assert cli_main(["model", "info", str(hf_dir), "--json"]) == 0
    assert cli_main(["model", "info", gguf_path, "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split('"params": ')[1] == out[1].split('"params": ')[1]


def _refused(argv, capsys) -> str:
    assert cli_main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_contradicting_settings_are_one_line_naming_both(base, tmp_path, capsys):
    root, tok, hf_dir, gguf_path, _ = base
    train_args = ["train", "--config", str(REPO / "configs" / "cpt_tiny.py"), "--workdir", str(tmp_path / "w"),
                  *tiny_overrides(root, str(tok)), f"--config.model.init_from={hf_dir}"]
    err = _refused(train_args, capsys)                           # tiny_overrides sets model.num_layers=1
    assert "model.num_layers" in err and "1 contradicts" in err and "num_layers is 3" in err and str(hf_dir) in err
    err = _refused(train_args + ["--config.model.num_layers=0", "--config.model.vocab_size=512"], capsys)
    assert "model.vocab_size" in err and "512 contradicts" in err and "vocab_size is 384" in err
    # A tokenizer other than the checkpoint's own: refused, naming both.
    other = train_tokenizer(write_corpus(tmp_path / "other", seed=5), tmp_path / "other_tok")
    err = _refused(train_args[:-1] + [f"--config.tokenizer.path={other}", f"--config.model.init_from={hf_dir}",
                                      "--config.model.num_layers=0"], capsys)
    assert str(other) in err and "differs from model.init_from's own tokenizer" in err and str(hf_dir) in err


def test_a_tokenizer_larger_than_the_checkpoints_embedding_is_refused(base, tmp_path):
    root, tok, _, _, _ = base
    torch.manual_seed(0)
    small = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=300, **SHAPE)).float()
    small.save_pretrained(tmp_path / "small")
    with pytest.raises(InputError) as err:
        train(_config(root, **{"model.init_from": str(tmp_path / "small"), "tokenizer.path": str(tok)}),
              str(tmp_path / "w"))
    assert "the tokenizer has 320 tokens" in str(err.value) and "embeds 300" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_grpo_run_from_a_checkpoint_trains_its_reward_model_from_it(base, tmp_path, monkeypatch):
    """The reward model a GRPO run trains first (rl.rm_recipe) starts from the run's own init_from."""
    import jaxwrite.train
    from jaxwrite.rl import prepare_grpo
    from jaxwrite.train import TrainConfig

    root, _, hf_dir, _, _ = base
    seen = {}

    def fake_train(config, workdir):
        seen[config.objective] = (config.model.init_from, config.tokenizer.path)
        return 0

    monkeypatch.setattr(jaxwrite.train, "train", fake_train)
    config = TrainConfig.from_recipe(load_config(
        str(REPO / "configs" / "grpo_tiny.py"),
        [f"--config.model.init_from={hf_dir}", "--config.rl.rm_recipe=rm_tiny",
         "--config.rl.rewards=('length', 'writing_rm')", "--config.rl.reward_weights=()"]))
    prepared = prepare_grpo(config, str(tmp_path))
    assert seen == {"bradley_terry": (str(hf_dir), "")}          # no policy recipe: the checkpoint is the policy
    assert prepared.model.init_from == str(hf_dir) and prepared.rl.rm_path == str(tmp_path / "rm" / "checkpoints")
