"""Building the run: the model config (the init_from checkpoint's own, else the recipe's preset), and model +
optimiser created directly on the mesh."""
from __future__ import annotations

import sys

import jax
import ml_collections
import optax
from flax import nnx
from jax.sharding import Mesh

from jaxwrite.checkpoint import load_pretrained, pretrained_config
from jaxwrite.checkpoint._trees import check_matches
from jaxwrite.checkpoint.model_dir import MODEL_CLASSES
from jaxwrite.common import InputError
from jaxwrite.models import LoRASpec, ModelConfig, add_lora, get_preset, trainable
from jaxwrite.parallel import state_shardings


def model_config(model_cfg: ml_collections.ConfigDict, tokenizer_vocab: int | None) -> ModelConfig:
    """The run's ModelConfig.

    With `model.init_from` the checkpoint defines the architecture (its config.json, GGUF metadata or
    model_config.json); the preset is then unused. `vocab_size` and `num_layers` are 0 unless a recipe
    or `--config.` sets them, and a set value must agree with the checkpoint (one-line error naming
    both). Without it: the preset, vocab_size 0 taking the tokenizer's, num_layers 0 keeping the
    preset's. Compute settings (dtype, param_dtype, remat, attention, attention_block) are always the
    recipe's. `tokenizer_vocab` None: not known here (`jaxwrite compile`).
    """
    lora = lora_spec(model_cfg)
    compute = {"dtype": model_cfg.dtype, "param_dtype": lora.base_dtype if lora else model_cfg.param_dtype,
               "remat": model_cfg.remat,
               "attention": model_cfg.get("attention", "auto"),
               "attention_block": int(model_cfg.get("attention_block", 512))}
    if model_cfg.get("init_from"):
        cfg = _checkpoint_config(model_cfg, tokenizer_vocab)
    else:
        try:
            cfg = get_preset(model_cfg.preset)
        except KeyError as err:
            raise InputError(str(err.args[0]), field="model.preset") from None
        vocab = int(model_cfg.vocab_size) or tokenizer_vocab or cfg.vocab_size
        if tokenizer_vocab and vocab < tokenizer_vocab:
            raise InputError(f"vocab_size {vocab} is smaller than the tokenizer's {tokenizer_vocab}",
                             field="model.vocab_size")
        compute["vocab_size"] = vocab
        if int(model_cfg.num_layers):
            compute["num_layers"] = int(model_cfg.num_layers)
    try:
        return cfg.replace(**compute)
    except ValueError as err:
        raise InputError(str(err), field="model") from None


def lora_spec(model_cfg: ml_collections.ConfigDict) -> LoRASpec | None:
    """The run's adapters (model.lora), or None when its rank is 0 or the group is absent."""
    section = model_cfg.get("lora")
    if not section:
        return None
    return LoRASpec.parse(section.get("rank", 0), section.get("alpha", 16.0), section.get("targets", "all"),
                          section.get("base_dtype", "bfloat16"))


def _checkpoint_config(model_cfg: ml_collections.ConfigDict, tokenizer_vocab: int | None) -> ModelConfig:
    """model.init_from's own config, checked against the recipe's explicit shape fields and the tokenizer."""
    init_from = model_cfg.init_from
    cfg, _ = pretrained_config(init_from, field="model.init_from")
    for field, found in (("vocab_size", cfg.vocab_size), ("num_layers", cfg.num_layers)):
        wanted = int(model_cfg.get(field, 0) or 0)
        if wanted and wanted != found:
            raise InputError(f"{wanted} contradicts model.init_from ({init_from}), whose {field} is {found}; "
                             f"expected {found}, or 0 to take the checkpoint's", field=f"model.{field}")
    if tokenizer_vocab and tokenizer_vocab > cfg.vocab_size:
        raise InputError(f"the tokenizer has {tokenizer_vocab} tokens but model.init_from ({init_from}) embeds "
                         f"{cfg.vocab_size}; expected the checkpoint's own tokenizer", field="tokenizer.path")
    return cfg


def _load_initial_state(init_from: str, model_class: str, mesh: Mesh, rules) -> tuple[nnx.Module, bool]:
    """(weights to start from, whether they are a causal LM's to go under a reward model's backbone):
    a Hugging Face dir or hub id, a jaxwrite model dir / checkpoint, or a GGUF file."""
    loaded = load_pretrained(init_from, mesh=mesh, rules=rules, field="model.init_from")
    if type(loaded) is MODEL_CLASSES[model_class]:
        return loaded, False
    if model_class == "reward_model" and type(loaded) is MODEL_CLASSES["transformer"]:
        # A reward model starts from a language model: its backbone, with the score head from the seed.
        print(f"reward model: backbone from {init_from}; score head initialised from the seed", file=sys.stderr)
        return loaded, True
    raise InputError(f"expected weights for a {model_class}, found a {type(loaded).__name__}",
                     path=init_from, field="model.init_from")


def create_model_and_optimizer(model_class: str, cfg: ModelConfig, tx: optax.GradientTransformation,
                               seed: int, mesh: Mesh, rules,
                               init_from: str = "", lora: LoRASpec | None = None) -> tuple[nnx.Module, nnx.Optimizer]:
    """Initialises (or loads) parameters and optimiser state straight into their shardings on `mesh`,
    so no device ever holds the full unsharded model. With `lora`, zero-delta adapters go on after the
    weights are loaded and the optimiser holds state for what the run trains (`models.lora.trainable`)."""
    cls = MODEL_CLASSES[model_class]
    abstract = nnx.eval_shape(lambda: cls(cfg, nnx.Rngs(seed)))
    graphdef, abstract_state = nnx.split(abstract)
    shardings = state_shardings(abstract_state, mesh, rules)
    with jax.set_mesh(mesh):
        state = jax.jit(lambda: nnx.split(cls(cfg, nnx.Rngs(seed)))[1], out_shardings=shardings)()
    model = nnx.merge(graphdef, state)
    if init_from:
        loaded, backbone_only = _load_initial_state(init_from, model_class, mesh, rules)
        target = model.backbone if backbone_only else model
        found = nnx.to_pure_dict(nnx.state(loaded))
        if backbone_only:
            found.pop("lm_head", None)
        own = nnx.state(target)
        check_matches(nnx.to_pure_dict(own), found, "parameter", init_from)
        nnx.replace_by_pure_dict(own, jax.tree.map(lambda new, old: new.astype(old.dtype), found,
                                                   nnx.to_pure_dict(own)))
        nnx.update(target, own)
        del loaded, found
    if lora is not None:
        add_lora(model, lora, seed, mesh, rules)
        graphdef = nnx.graphdef(model)
    wrt = trainable(model_class, lora)
    opt_abstract = nnx.eval_shape(lambda: nnx.Optimizer(model, tx, wrt=wrt))
    opt_graphdef, opt_abstract_state = nnx.split(opt_abstract)
    opt_shardings = state_shardings(opt_abstract_state, mesh, rules)
    params_only = nnx.state(model)
    with jax.set_mesh(mesh):
        opt_state = jax.jit(lambda s: nnx.split(nnx.Optimizer(nnx.merge(graphdef, s), tx, wrt=wrt))[1],
                            out_shardings=opt_shardings)(params_only)
    return model, nnx.merge(opt_graphdef, opt_state)
