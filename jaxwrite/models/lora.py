"""Low-rank adapters (LoRA, Hu et al. 2021): a projection's weight W becomes W + (alpha / rank) · A B.

A run with adapters trains only them (`LoRAParam`, and a reward model's score head): the base stays frozen,
stored in `LoRASpec.base_dtype`, so a 7B model's weights cost 2 bytes a parameter and the optimiser holds
state for the adapters alone. Adapters hang off the stacked layer modules as `<weight>_lora`, so the layer
scan slices them with the weights, and `adapted_weight` (the one place the projections read a weight)
adds A B per layer inside the scan: one layer's delta is ever materialised, never the whole model's.

Shapes: a weight [*I, *O] (its input axes, then its output axes: q [D, N, H] is I = (D,), O = (N, H);
o [N, H, D] is I = (N, H), O = (D,)) gets A [*I, R] and B [R, *O]; stacked over layers, [L, ...] in
front. B starts at zero, so an adapted model starts equal to its base.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterable

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.common.errors import InputError

# target -> (sub-module of a Block, how many leading axes of the weight are its input axes)
TARGETS = {"q": ("attn", 1), "k": ("attn", 1), "v": ("attn", 1), "o": ("attn", 2),
           "gate": ("mlp", 1), "up": ("mlp", 1), "down": ("mlp", 1)}
# Hugging Face / PEFT module names, and the groups people ask for.
_ALIASES = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up",
            "down_proj": "down"}
_GROUPS = {"all": tuple(TARGETS), "all-linear": tuple(TARGETS), "attention": ("q", "k", "v", "o"),
           "mlp": ("gate", "up", "down")}
_SUFFIX = "_lora"


class LoRAParam(nnx.Param):
    """An adapter matrix: what a LoRA run's optimiser updates."""


@dataclasses.dataclass(frozen=True)
class LoRASpec:
    """rank R, alpha (the delta is scaled by alpha / R), the adapted projections, the frozen base's dtype."""
    rank: int
    alpha: float
    targets: tuple[str, ...]
    base_dtype: str = "bfloat16"

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def parse(cls, rank, alpha, targets: str | Iterable[str], base_dtype: str = "bfloat16",
              field: str = "model.lora", path: str | None = None) -> "LoRASpec | None":
        """The spec of a config section or a saved record; None when rank is 0 (no adapters). One-line
        errors name the field."""
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise InputError(f"expected a non-negative integer (0 = no adapters), got {rank!r}", path=path,
                             field=f"{field}.rank")
        if rank == 0:
            return None
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
            raise InputError(f"expected a positive number, got {alpha!r}", path=path, field=f"{field}.alpha")
        names = [t.strip() for t in targets.split(",")] if isinstance(targets, str) else list(targets)
        chosen: list[str] = []
        for name in filter(None, names):
            for target in _GROUPS.get(name, (_ALIASES.get(name, name),)):
                if target not in TARGETS:
                    raise InputError(f"the model has no module '{name}'; expected one of "
                                     f"{', '.join([*TARGETS, *_ALIASES, *_GROUPS])}", path=path,
                                     field=f"{field}.targets")
                if target not in chosen:
                    chosen.append(target)
        if not chosen:
            raise InputError("expected at least one module to adapt (e.g. all, attention, q,v)", path=path,
                             field=f"{field}.targets")
        if base_dtype not in ("bfloat16", "float32", "float16"):
            raise InputError(f"expected bfloat16, float16 or float32, got {base_dtype!r}", path=path,
                             field=f"{field}.base_dtype")
        return cls(int(rank), float(alpha), tuple(t for t in TARGETS if t in chosen), base_dtype)


class LoRA(nnx.Module):
    """The two factors of one weight's adapter and their scale."""

    def __init__(self, a, b, in_axes: tuple, out_axes: tuple, scale: float):
        self.a = LoRAParam(a, axes=tuple(in_axes) + (None,))      # [*I, R]
        self.b = LoRAParam(b, axes=(None,) + tuple(out_axes))     # [R, *O]
        self.scale = scale

    def delta(self) -> jax.Array:
        """scale · A B in float32, shaped like one layer's weight [*I, *O]."""
        return _delta(self.a.get_value(), self.b.get_value(), self.scale)


def _delta(a: jax.Array, b: jax.Array, scale: float) -> jax.Array:
    rank = a.shape[-1]
    product = a.reshape(-1, rank).astype(jnp.float32) @ b.reshape(rank, -1).astype(jnp.float32)
    return (scale * product).reshape(a.shape[:-1] + b.shape[1:])


def adapted_weight(module: nnx.Module, name: str, dtype) -> jax.Array:
    """`module.<name>` in the compute dtype, plus its adapter's delta when it has one (added in float32,
    then cast, so the result equals the merged weight's)."""
    weight = getattr(module, name).get_value()
    lora = getattr(module, name + _SUFFIX, None)
    if lora is None:
        return weight.astype(dtype)
    return (weight.astype(jnp.float32) + lora.delta()).astype(dtype)


def _backbone(model: nnx.Module) -> nnx.Module:
    """The Transformer of a causal LM or of a reward model."""
    return getattr(model, "backbone", model)


def _sites(model: nnx.Module, targets: Iterable[str]):
    """(module holding the stacked weight, the weight's name = the target, its number of input axes)."""
    layers = _backbone(model).layers
    for target in targets:
        owner, n_in = TARGETS[target]
        yield getattr(layers, owner), target, n_in


def add_lora(model: nnx.Module, spec: LoRASpec, seed: int = 0, mesh=None, rules=None) -> nnx.Module:
    """Attaches zero-delta adapters to `spec.targets` of every layer (in place; returns the model). A is
    normal with std 1/sqrt(fan-in), B is zero. With a mesh the factors are created in their shardings;
    on an abstract model (nnx.eval_shape) they are abstract too."""
    from jaxwrite.parallel import DEFAULT_RULES, logical_sharding

    for index, (module, name, n_in) in enumerate(_sites(model, spec.targets)):
        weight = getattr(module, name)
        shape, axes = weight.get_value().shape, tuple(weight.get_metadata().get("axes", ()))
        layers, in_shape, out_shape = shape[0], shape[1:1 + n_in], shape[1 + n_in:]
        in_axes, out_axes = axes[:n_in], axes[n_in:]
        fan_in = math.prod(in_shape)

        def init(key, layers=layers, in_shape=in_shape, out_shape=out_shape, fan_in=fan_in):
            a = jax.random.normal(key, (layers, *in_shape, spec.rank), jnp.float32) * fan_in ** -0.5
            return a, jnp.zeros((layers, spec.rank, *out_shape), jnp.float32)

        key = jax.random.fold_in(jax.random.key(seed), index)
        if isinstance(weight.get_value(), jax.ShapeDtypeStruct):
            a, b = jax.eval_shape(init, key)
        elif mesh is not None:
            rules = rules or DEFAULT_RULES
            a_shape, b_shape = (layers, *in_shape, spec.rank), (layers, spec.rank, *out_shape)
            shardings = (logical_sharding(("layers", *in_axes, None), a_shape, mesh, rules),
                         logical_sharding(("layers", None, *out_axes), b_shape, mesh, rules))
            with jax.set_mesh(mesh):
                a, b = jax.jit(init, out_shardings=shardings)(key)
        else:
            a, b = init(key)
        setattr(module, name + _SUFFIX, LoRA(a, b, in_axes, out_axes, spec.scale))
    score = getattr(model, "score", None)
    if score is not None:   # a reward model's head trains in full: in float32, not in the frozen base's dtype
        value = score.get_value()
        score.set_value(jax.ShapeDtypeStruct(value.shape, jnp.float32, sharding=getattr(value, "sharding", None))
                        if isinstance(value, jax.ShapeDtypeStruct) else value.astype(jnp.float32))
    return model


def merge_lora(model: nnx.Module) -> nnx.Module:
    """Folds every adapter into its weight (W + scale · A B, in float32, stored in W's dtype) and removes
    the adapters: the model a LoRA run exports is a plain model of its base's shape (in place)."""
    for module, name, _ in _sites(model, TARGETS):
        lora = getattr(module, name + _SUFFIX, None)
        if lora is None:
            continue
        weight = getattr(module, name)
        stacked = jax.vmap(functools.partial(_delta, scale=lora.scale))(lora.a.get_value(), lora.b.get_value())
        weight.set_value((weight.get_value().astype(jnp.float32) + stacked).astype(weight.get_value().dtype))
        delattr(module, name + _SUFFIX)
    score = getattr(model, "score", None)
    if score is not None:
        score.set_value(score.get_value().astype(jnp.dtype(model.cfg.param_dtype)))
    return model


def trainable(model_class: str, spec: LoRASpec | None):
    """The NNX filter of what a run trains: every parameter, or with adapters the adapters (and a reward
    model's score head, which starts from the seed and has nothing to adapt)."""
    if spec is None:
        return nnx.Param
    if model_class == "reward_model":
        return nnx.Any(LoRAParam, nnx.PathContains("score"))
    return LoRAParam
