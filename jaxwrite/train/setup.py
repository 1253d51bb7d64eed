"""Building the run: model config from the recipe, and model + optimiser created directly on the mesh."""
from __future__ import annotations

import os

import jax
import ml_collections
import optax
from flax import nnx
from jax.sharding import Mesh

from jaxwrite.checkpoint import load_model_from_checkpoint
from jaxwrite.checkpoint._trees import check_matches
from jaxwrite.checkpoint.model_dir import CONFIG_FILE, MODEL_CLASSES
from jaxwrite.common import InputError
from jaxwrite.models import ModelConfig, get_preset, load_hf
from jaxwrite.parallel import state_shardings


def model_config(model_cfg: ml_collections.ConfigDict, tokenizer_vocab: int) -> ModelConfig:
    """Preset + overrides. vocab_size 0 takes the tokenizer's; num_layers 0 keeps the preset's."""
    try:
        cfg = get_preset(model_cfg.preset)
    except KeyError as err:
        raise InputError(str(err.args[0]), field="model.preset") from None
    changes = {"dtype": model_cfg.dtype, "param_dtype": model_cfg.param_dtype, "remat": model_cfg.remat,
               "attention": model_cfg.get("attention", "auto"),
               "attention_block": int(model_cfg.get("attention_block", 512))}
    vocab = int(model_cfg.vocab_size) or tokenizer_vocab
    if vocab < tokenizer_vocab:
        raise InputError(f"vocab_size {vocab} is smaller than the tokenizer's {tokenizer_vocab}",
                         field="model.vocab_size")
    changes["vocab_size"] = vocab
    if int(model_cfg.num_layers):
        changes["num_layers"] = int(model_cfg.num_layers)
    try:
        return cfg.replace(**changes)
    except ValueError as err:
        raise InputError(str(err), field="model") from None


def _load_initial_state(init_from: str, model_class: str, mesh: Mesh, rules) -> nnx.State:
    """Weights to start from: a jaxwrite model dir / checkpoint, or a Hugging Face directory."""
    path = os.path.abspath(os.path.expanduser(init_from))
    is_jaxwrite = any(os.path.exists(os.path.join(path, *p, CONFIG_FILE)) for p in ((), ("checkpoints",), ("..",)))
    if os.path.exists(os.path.join(path, "config.json")) and not is_jaxwrite:
        loaded = load_hf(path, mesh=mesh, rules=rules, reward_model=model_class == "reward_model")
    else:
        loaded, _ = load_model_from_checkpoint(path, mesh=mesh, rules=rules)
    if type(loaded) is not MODEL_CLASSES[model_class]:
        raise InputError(f"expected weights for a {model_class}, found a {type(loaded).__name__}",
                         path=path, field="model.init_from")
    return nnx.state(loaded)


def create_model_and_optimizer(model_class: str, cfg: ModelConfig, tx: optax.GradientTransformation,
                               seed: int, mesh: Mesh, rules,
                               init_from: str = "") -> tuple[nnx.Module, nnx.Optimizer]:
    """Initialises (or loads) parameters and optimiser state straight into their shardings on `mesh`,
    so no device ever holds the full unsharded model."""
    cls = MODEL_CLASSES[model_class]
    abstract = nnx.eval_shape(lambda: cls(cfg, nnx.Rngs(seed)))
    graphdef, abstract_state = nnx.split(abstract)
    shardings = state_shardings(abstract_state, mesh, rules)
    with jax.set_mesh(mesh):
        state = jax.jit(lambda: nnx.split(cls(cfg, nnx.Rngs(seed)))[1], out_shardings=shardings)()
    model = nnx.merge(graphdef, state)
    if init_from:
        loaded = _load_initial_state(init_from, model_class, mesh, rules)
        check_matches(nnx.to_pure_dict(nnx.state(model)), nnx.to_pure_dict(loaded), "parameter", init_from)
        nnx.update(model, jax.tree.map(lambda new, old: new.astype(old.dtype), loaded, nnx.state(model)))
    opt_abstract = nnx.eval_shape(lambda: nnx.Optimizer(model, tx, wrt=nnx.Param))
    opt_graphdef, opt_abstract_state = nnx.split(opt_abstract)
    opt_shardings = state_shardings(opt_abstract_state, mesh, rules)
    params_only = nnx.state(model)
    with jax.set_mesh(mesh):
        opt_state = jax.jit(lambda s: nnx.split(nnx.Optimizer(nnx.merge(graphdef, s), tx, wrt=nnx.Param))[1],
                            out_shardings=opt_shardings)(params_only)
    return model, nnx.merge(opt_graphdef, opt_state)
