"""LoRA (issue 25 §4): adapters start at zero delta, a LoRA step changes only the adapters (and a reward
model's head), the run's model loads merged (base + scale·A B within 1e-6) wherever a model is taken and
converts to a Hugging Face dir, a resumed LoRA run repeats the uninterrupted one, and bad settings are one
line each."""
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from flax import nnx  # noqa: E402

from jaxwrite.checkpoint import Checkpointer, load_model_from_checkpoint, load_pretrained, read_model_config  # noqa: E402,E501
from jaxwrite.cli import main as cli_main  # noqa: E402
from jaxwrite.common import InputError, load_config  # noqa: E402
from jaxwrite.models import LoRASpec, RewardModel, Transformer, add_lora, get_preset, merge_lora  # noqa: E402,E501
from jaxwrite.models.lora import LoRAParam  # noqa: E402
from jaxwrite.parallel import DEFAULT_RULES, make_mesh  # noqa: E402
from jaxwrite.train import StepFunctions, bradley_terry_loss, create_model_and_optimizer, train  # noqa: E402
from train_fixtures import REPO, llama_hf_dir, tiny_overrides, write_corpus  # noqa: E402

SHAPE = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=96, max_position_embeddings=512, tie_word_embeddings=False)
SPEC = LoRASpec.parse(4, 8.0, "all", "float32")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(corpus root, HF dir with its SentencePiece tokenizer)."""
    root = tmp_path_factory.mktemp("lora")
    write_corpus(root)
    return root, llama_hf_dir(root, SHAPE)[0]


def _flat(state):
    return {"/".join(map(str, path)): np.asarray(v.get_value()) for path, v in nnx.to_flat_state(state)}


def _randomise_adapters(model, seed=0):
    keys = iter(jax.random.split(jax.random.key(seed), 64))
    state = nnx.state(model, LoRAParam)
    nnx.update(model, jax.tree.map(lambda x: jax.random.normal(next(keys), x.shape) * 0.05, state))


def test_adapters_start_at_zero_and_merge_to_base_plus_scaled_ba():
    model = Transformer(get_preset("tiny"), nnx.Rngs(0))
    tokens = jnp.arange(24).reshape(2, 12) % 97
    before = np.asarray(model(tokens).logits)
    add_lora(model, SPEC, seed=1)
    np.testing.assert_array_equal(np.asarray(model(tokens).logits), before)     # B = 0: the base model
    _randomise_adapters(model)
    adapted = np.asarray(model(tokens).logits)
    assert np.abs(adapted - before).max() > 1e-3
    attn = model.layers.attn
    w, a, b = (np.asarray(x.get_value(), np.float64) for x in (attn.o, attn.o_lora.a, attn.o_lora.b))
    want = w + SPEC.scale * np.einsum("LNHR,LRD->LNHD", a, b)                 # o: [L, N, H, D], input N·H
    merge_lora(model)
    assert not jax.tree.leaves(nnx.state(model, LoRAParam))                       # adapters folded away
    np.testing.assert_allclose(np.asarray(model.layers.attn.o.get_value()), want, atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.asarray(model(tokens).logits), adapted, atol=1e-5, rtol=0)


def _config(root, hf_dir, **extra):
    values = {"model.init_from": str(hf_dir), "model.num_layers": 0, "model.lora.rank": 4,
              "model.lora.alpha": 8.0, "model.lora.base_dtype": "float32", "num_steps": 4, "checkpoint_every": 2,
              "optimizer.learning_rate": 3e-2, "optimizer.warmup_steps": 1, "eval_every": 0, "log_every": 1, **extra}
    overrides = [o for o in tiny_overrides(root, "") if not o.startswith(("--config.tokenizer.path",
                                                                          "--config.model.num_layers"))]
    return load_config(str(REPO / "configs" / "cpt_tiny.py"), overrides + [f"--config.{k}={v}" for k, v in values.items()])


def _raw_run(workdir, step=None):
    """The run's checkpoint as saved: base weights and adapters apart."""
    cfg, _ = read_model_config(str(workdir))
    model = nnx.eval_shape(lambda: Transformer(cfg, nnx.Rngs(0)))
    add_lora(model, SPEC)
    ckpt = Checkpointer(str(workdir / "checkpoints"))
    try:
        ckpt.restore(model, None, step)
    finally:
        ckpt.close()
    return model


def _losses(workdir):
    import json
    return [(r["step"], r["loss"]) for r in map(json.loads, (workdir / "metrics.jsonl").read_text().splitlines())
            if "loss" in r]


def test_a_lora_run_trains_only_adapters_loads_merged_and_resumes_exactly(base, tmp_path):
    root, hf_dir = base
    work = tmp_path / "w"
    assert train(_config(root, hf_dir), str(work)) == 0
    raw = _raw_run(work)
    start = _flat(nnx.state(load_pretrained(str(hf_dir))))
    frozen = _flat(nnx.state(raw, nnx.Not(LoRAParam)))
    assert frozen.keys() == start.keys() and all(np.array_equal(frozen[k], start[k]) for k in start)   # base frozen
    adapters = _flat(nnx.state(raw, LoRAParam))
    assert len(adapters) == 2 * 7 and all(np.abs(v).max() > 0 for k, v in adapters.items() if k.endswith("/b"))

    # Every command's loader (serve, generate, convert, init_from) sees the merged model.
    merged, cfg = load_model_from_checkpoint(work)
    assert not jax.tree.leaves(nnx.state(merged, LoRAParam)) and cfg.d_model == 48
    mlp = raw.layers.mlp
    want = (np.asarray(mlp.gate.get_value(), np.float64)
            + SPEC.scale * np.einsum("LDR,LRF->LDF", *(np.asarray(x.get_value(), np.float64)
                                                       for x in (mlp.gate_lora.a, mlp.gate_lora.b))))
    np.testing.assert_allclose(np.asarray(merged.layers.mlp.gate.get_value()), want, atol=1e-6, rtol=0)
    tokens = jnp.arange(40).reshape(2, 20) * 7 % 384
    np.testing.assert_allclose(np.asarray(merged(tokens).logits), np.asarray(raw(tokens).logits), atol=1e-5, rtol=0)
    assert cli_main(["convert", str(work), str(tmp_path / "hf_out"), "--to", "hf"]) == 0
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf_out").float().eval()
    with torch.no_grad():
        ref = exported(torch.tensor(np.asarray(tokens))).logits.numpy()
    np.testing.assert_allclose(ref, np.asarray(merged(tokens).logits), atol=1e-4, rtol=0)

    # Exact resume: drop the last checkpoint and run again; steps 3-4 repeat bit for bit.
    shutil.rmtree(work / "checkpoints" / "4")
    reference = _losses(work)
    assert train(_config(root, hf_dir), str(work)) == 0
    assert _losses(work) == reference and [s for s, _ in reference] == [1, 2, 3, 4]
    again = _flat(nnx.state(_raw_run(work), LoRAParam))
    assert all(np.array_equal(again[k], adapters[k]) for k in adapters)


def test_a_reward_model_trains_its_adapters_and_head_only():
    cfg = get_preset("tiny").replace(vocab_size=256)
    mesh = make_mesh((1, -1, 1))
    model, optimizer = create_model_and_optimizer("reward_model", cfg, optax.adam(1e-2), 0, mesh, DEFAULT_RULES,
                                                  lora=SPEC)
    assert isinstance(model, RewardModel) and model.score.get_value().dtype == jnp.float32
    steps = StepFunctions(model, optimizer, bradley_terry_loss, mesh, DEFAULT_RULES)
    state = nnx.split((model, optimizer))[1]
    before = _flat(nnx.state(model))
    rng = np.random.default_rng(0)
    batch = {"chosen_tokens": rng.integers(1, 256, (8, 16), dtype=np.int32),
             "rejected_tokens": rng.integers(1, 256, (8, 16), dtype=np.int32),
             "chosen_length": np.full(8, 16, np.int32), "rejected_length": np.full(8, 12, np.int32)}
    state, _ = steps.train(state, batch, jax.random.key(0))
    state, _ = steps.train(state, batch, jax.random.key(1))
    after_model = nnx.merge(nnx.graphdef((model, optimizer)), state)[0]
    after = _flat(nnx.state(after_model))
    changed = {k for k in before if not np.array_equal(before[k], after[k])}
    assert "score" in changed and all("_lora/" in k or k == "score" for k in changed)   # the base is frozen
    assert any(k.endswith("_lora/b") for k in changed)


@pytest.mark.parametrize("values, message", [
    ({"model.lora.targets": "q,qkv"}, "field 'model.lora.targets': the model has no module 'qkv'"),
    ({"model.lora.rank": -2}, "field 'model.lora.rank': expected a non-negative integer"),
    ({"model.lora.alpha": 0.0}, "field 'model.lora.alpha': expected a positive number"),
])
def test_bad_lora_settings_are_one_line(base, tmp_path, values, message):
    root, hf_dir = base
    with pytest.raises(InputError) as err:
        train(_config(root, hf_dir, **values), str(tmp_path / "w"))
    assert message in str(err.value) and "\n" not in str(err.value)
