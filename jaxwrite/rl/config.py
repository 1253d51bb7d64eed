"""The `rl` section of a GRPO recipe as one typed object, with the LongWriter-Zero paper's defaults.

Recipes start from `rl_config()` (the defaults as an ml-collections group) and set what they change;
the run converts the section once, at load, into an `RLConfig` (jaxwrite.train.config), whose fields
are checked there: an unknown key, a value of the wrong type or out of range, or a name no registry
knows fails before anything trains, naming `rl.FIELD`. A new setting is one line here: its type,
default, meaning and bounds or choices.
"""
from __future__ import annotations

import ml_collections

from jaxwrite.common import InputError
from jaxwrite.common.settings import Settings, setting, settings_class
from jaxwrite.kernels.logprobs import LOGPROB_IMPLS
from jaxwrite.rl.algo_core import ADVANTAGE_ESTIMATORS, IS_CORRECTIONS, LOSS_AGGREGATIONS
from jaxwrite.rl.length import LANGS
from jaxwrite.rl.length_task import STYLES
from jaxwrite.rl.rewards import REWARDS

TEMPLATES = ("base", "chat", "plain")


@settings_class
class LengthTaskConfig(Settings):
    """The built-in length-control prompts (`rl.prompts = "length_control"`, rl/length_task.py)."""
    SECTION = "rl.length_task"
    count: int = setting(64, "prompts generated", min=1)
    min_words: int = setting(20, "the shortest requested length, in words", min=1)
    max_words: int = setting(60, "the longest requested length, in words", min=1)
    zh_fraction: float = setting(0.0, "share of the prompts in Chinese", min=0, max=1)
    style: str = setting("about", "about: 'in about N words' (N ± 10 %) | range: LongWriter-style 'in A to B "
                                  "words' (the target ± 25 %)", choices=STYLES)

    def __post_init__(self):
        super().__post_init__()
        if self.min_words > self.max_words:
            raise InputError(f"min_words {self.min_words} is above max_words {self.max_words}",
                             field="rl.length_task.min_words")


@settings_class
class RLConfig(Settings):
    """GRPO the LongWriter-Zero way: rollouts, rewards, advantages and the clipped policy loss."""
    SECTION = "rl"
    # --- prompts and rollouts
    prompts: str = setting("length_control", "an RL prompt file (jsonl: id, prompt[, lower, upper]) or "
                                             "length_control (the built-in task, rl.length_task)")
    default_range: tuple[int, ...] = setting((), "(lower, upper) words for prompts with neither a range nor an "
                                                 "explicit request; () = none")
    length_task: LengthTaskConfig = setting(factory=LengthTaskConfig, doc="the built-in length-control prompts")
    template: str = setting("base", "base: prompt ending in <think> (RL from a base model) | chat | plain (no "
                                    "think/answer protocol)", choices=TEMPLATES)
    lang: str = setting("auto", "prompt language: auto (the prompt's dominant script) or one of the languages",
                        choices=("auto",) + LANGS)
    prompts_per_step: int = setting(32, "prompts per rollout (paper: 32 x 32 samples, T 0.8, top-p 1.0, 14k "
                                        "tokens)", min=1)
    group_size: int = setting(32, "samples per prompt (G)", min=1)
    temperature: float = setting(0.8, "sampling temperature (also of the policy's log-probs)", above=0)
    top_p: float = setting(1.0, "nucleus sampling", above=0, max=1)
    max_new_tokens: int = setting(14_000, "tokens a sample may generate", min=1)
    words_per_token: float = setting(0.0, "L_max (words) of the length reward = max_new_tokens x this; 0 = "
                                          "measured per language with the policy tokenizer (rl/length.py)", min=0)
    engine_max_batch: int = setting(64, "rows the rollout engine decodes at once", min=1)
    engine_chunk_steps: int = setting(32, "decode steps per engine call", min=1)
    # --- asynchronous and partial rollouts (rl/pipeline.py, rl/partial.py; docs/GRPO.md)
    max_staleness: int = setting(0, "s: rollouts are generated while earlier steps train, never from weights more "
                                    "than s updates old (rollouts of updates_per_rollout updates each); 0 = "
                                    "the synchronous loop", min=0)
    is_correction: str = setting("auto", "token importance weights against the sampler's log-probs: tis "
                                         "(truncated, Yao et al. 2025) | none | auto (tis when rollouts may be "
                                         "off-policy: max_staleness > 0 or partial rollouts)",
                                 choices=("auto",) + tuple(IS_CORRECTIONS.names()))
    is_cap: float = setting(2.0, "C of the truncated weight min(pi_old / pi_sampler, C)", above=0)
    rollout_mesh: tuple[int, ...] = setting((), "(data, fsdp, tensor) of a rollout mesh on devices of its own "
                                                "(the last ones; the training mesh takes the rest), weights "
                                                "synced device to device; () = the engine shares the training "
                                                "mesh")
    partial_rollout_tokens: int = setting(0, "K: a sample not finished after K new tokens in a step is parked "
                                             "(its tokens) and continued next step with the new weights; 0 = off",
                                          min=0)
    # --- rewards and advantages
    rewards: tuple[str, ...] = setting(("length", "writing_rm", "format"), "reward names (rl/rewards.py)",
                                       choices=REWARDS)
    reward_weights: tuple[float, ...] = setting((), "one weight per reward in the advantage; () = equal weights")
    advantage: str = setting("longwriter_zero", "advantage estimator (rl/algo_core.py)", choices=ADVANTAGE_ESTIMATORS)
    # DAPO (Yu et al. 2025, arXiv:2503.14476), beside clip-higher (eps_high) and token_mean aggregation
    dynamic_sampling: bool = setting(False, "DAPO: drop groups whose combined rewards are all equal (advantages "
                                            "all 0) and sample more prompts so a step trains on a full batch")
    dynamic_sampling_max_batches: int = setting(4, "dynamic sampling draws at most this many prompts_per_step "
                                                   "of prompts per step; still short, it fills up with dropped "
                                                   "groups (counted)", min=1)
    overlong_buffer: int = setting(0, "DAPO's overlong soft punishment: the last L_cache tokens before "
                                      "max_new_tokens, where an 'overlong' reward falls linearly to "
                                      "-overlong_penalty; 0 = off", min=0)
    overlong_penalty: float = setting(1.0, "the overlong reward at max_new_tokens is minus this", above=0)
    rm_path: str = setting("", "the trained Bradley-Terry RM of the writing_rm reward (checkpoint or workdir)")
    rm_max_len: int = setting(0, "tokens per RM row; 0 = the RM's own max_seq_len. Longer answers are scored "
                                 "in chunks and pooled (rl/rm_scorer.py), never cut", min=0)
    # --- the policy loss
    eps_low: float = setting(0.2, "lower clip of the ratio", min=0)
    eps_high: float | None = setting(None, "upper clip; None = eps_low (0.28: DAPO's clip-higher)", min=0)
    beta: float = setting(0.0, "KL to the frozen initial policy; 0 = off (paper)", min=0)
    loss_aggregation: str = setting("token_mean", "token_mean | seq_mean_token_mean | constant (Dr. GRPO)",
                                    choices=LOSS_AGGREGATIONS)
    mask_truncated: bool = setting(False, "drop samples cut by max_new_tokens from the loss")
    truncation_warning: float = setting(0.05, "warn when more than this share of samples is truncated", min=0, max=1)
    updates_per_rollout: int = setting(1, "optimiser steps (minibatches) per rollout", min=1)
    kernel: str = setting("auto", "log-prob kernel: auto (pallas on TPU, chunked on GPU/CPU) or a name of "
                                  "jaxwrite.kernels LOGPROB_IMPLS", choices=("auto",) + tuple(LOGPROB_IMPLS.names()))
    # --- what a person reads
    samples_every: int = setting(10, "write readable rollout samples (<workdir>/rollout_samples.jsonl) every N "
                                     "rollouts; 0 = never", min=0)
    samples_prompts: int = setting(4, "whole groups of the first N prompts of such a rollout", min=0)
    # --- what the run trains first, when model.init_from / rm_path are empty
    policy_recipe: str = setting("", "recipe trained into <workdir>/policy_init as the starting policy")
    policy_recipe_steps: int = setting(0, "its steps; 0 = the recipe's own num_steps", min=0)
    policy_recipe_from_init: bool = setting(False, "also train the policy recipe when model.init_from is set, "
                                                   "starting from that checkpoint (a protocol warm-up of a "
                                                   "pretrained model)")
    policy_recipe_overrides: tuple[str, ...] = setting((), "KEY=VALUE overrides of the policy recipe, e.g. "
                                                           "data.max_chars=400")
    protocol_docs: int = setting(0, "think/answer documents (rl/protocol_docs.py) mixed into the policy "
                                    "recipe's pretraining, LongWriter-Zero's own long-CoT slice; for an SFT "
                                    "policy recipe, its training records (chat protocol warm-up); 0 = none",
                                 min=0)
    protocol_weight: float = setting(0.01, "their share of the pretraining mix (paper: 1%)", above=0, max=1)
    rm_recipe: str = setting("", "recipe trained into <workdir>/rm as the writing reward model")
    rm_recipe_steps: int = setting(0, "its steps; 0 = the recipe's own num_steps", min=0)
    rm_recipe_overrides: tuple[str, ...] = setting((), "KEY=VALUE overrides of the RM recipe, e.g. "
                                                       "data.max_eval_pairs=16")

    def __post_init__(self):
        super().__post_init__()
        if self.default_range and not (len(self.default_range) == 2 and 0 < self.default_range[0]
                                       <= self.default_range[1]):
            raise InputError(f"expected () or (lower, upper) with 0 < lower <= upper, got {self.default_range}",
                             field="rl.default_range")
        columns = len(self.reward_names)
        if self.reward_weights and len(self.reward_weights) != columns:
            extra = " (the overlong penalty is one)" if self.overlong_buffer else ""
            raise InputError(f"{len(self.reward_weights)} weights for {columns} rewards{extra}",
                             field="rl.reward_weights")
        if self.partial_rollout_tokens > self.max_new_tokens:
            raise InputError(f"a partial-rollout budget of {self.partial_rollout_tokens} tokens is above "
                             f"max_new_tokens {self.max_new_tokens}", field="rl.partial_rollout_tokens")
        if self.dynamic_sampling and self.group_size < 2:
            raise InputError("dynamic sampling needs a group size of at least 2 (a group of 1 has no spread "
                             "of rewards, so every group would be dropped)", field="rl.dynamic_sampling")
        if self.overlong_buffer >= self.max_new_tokens:
            raise InputError(f"an overlong buffer of {self.overlong_buffer} tokens leaves nothing of "
                             f"max_new_tokens {self.max_new_tokens}", field="rl.overlong_buffer")
        if any(n < 1 for n in self.rollout_mesh) or self.rollout_mesh and len(self.rollout_mesh) != 3:
            raise InputError(f"expected () or three positive sizes (data, fsdp, tensor), got {self.rollout_mesh}",
                             field="rl.rollout_mesh")

    @property
    def reward_names(self) -> tuple[str, ...]:
        """The reward columns of the advantage: rl.rewards, then 'overlong' when its buffer is set."""
        return self.rewards + (("overlong",) if self.overlong_buffer else ())

    @property
    def off_policy(self) -> bool:
        """Whether rollouts may come from older weights than the update's (async or partial)."""
        return self.max_staleness > 0 or self.partial_rollout_tokens not in (0, self.max_new_tokens)

    @property
    def importance_correction(self) -> str:
        """is_correction with auto resolved."""
        if self.is_correction != "auto":
            return self.is_correction
        return "tis" if self.off_policy else "none"


def rl_config() -> ml_collections.ConfigDict:
    """The `rl` group a GRPO recipe starts from: RLConfig's defaults."""
    return RLConfig().to_config_dict()
