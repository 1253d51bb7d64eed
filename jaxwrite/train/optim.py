"""AdamW with linear warmup + cosine decay and global-norm clipping, from the `optimizer` section."""
from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import optax

if TYPE_CHECKING:
    from jaxwrite.train.config import OptimizerConfig


def learning_rate_schedule(opt_cfg: "OptimizerConfig", num_steps: int) -> optax.Schedule:
    """0 -> peak over `warmup_steps`, then cosine down to `peak * min_lr_ratio` at `num_steps`."""
    peak, warmup = opt_cfg.learning_rate, opt_cfg.warmup_steps
    decay_steps = max(num_steps, warmup + 1)
    return optax.warmup_cosine_decay_schedule(0.0, peak, warmup, decay_steps,
                                              end_value=peak * opt_cfg.min_lr_ratio)


def _decay_mask(params):
    """True for weight matrices. Norm weights, biases and the reward head's vector stay undecayed, as
    in the Llama/Qwen recipes. Scanned layers add a leading [layers] axis and biases are stored as
    [heads, head_dim], so the decision uses the parameter's path as well as its rank."""
    def one(path, p) -> bool:
        names = [str(getattr(k, "key", getattr(k, "name", ""))) for k in path]
        if names and (names[-1].endswith("bias") or any("norm" in n for n in names)):
            return False
        return p.ndim - int("layers" in names) >= 2
    return jax.tree_util.tree_map_with_path(one, params)


def make_optimizer(opt_cfg: "OptimizerConfig", num_steps: int) -> tuple[optax.GradientTransformation,
                                                                        optax.Schedule]:
    schedule = learning_rate_schedule(opt_cfg, num_steps)
    tx = optax.chain(
        optax.clip_by_global_norm(opt_cfg.clip_norm),
        optax.adamw(schedule, b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps, weight_decay=opt_cfg.weight_decay,
                    mask=_decay_mask),
    )
    return tx, schedule
