"""The `rl` section every GRPO recipe has, with the LongWriter-Zero paper's defaults."""
from __future__ import annotations

import ml_collections


def rl_config() -> ml_collections.ConfigDict:
    rl = ml_collections.ConfigDict()
    rl.prompts = "length_control"          # an RL prompt file (jsonl: id, prompt[, lower, upper]) or "length_control"
    rl.default_range = ()                  # (lower, upper) for prompts with neither a range nor an explicit request
    rl.length_task = ml_collections.ConfigDict({"count": 64, "min_words": 20, "max_words": 60,
                                                "zh_fraction": 0.0})
    # base: prompt ending in <think> (RL from a base model) | chat | plain (no protocol)
    rl.template = "base"
    rl.lang = "auto"
    rl.prompts_per_step = 32               # paper: 32 prompts x 32 samples, T 0.8, top-p 1.0, 14k tokens
    rl.group_size = 32
    rl.temperature = 0.8
    rl.top_p = 1.0
    rl.max_new_tokens = 14_000
    # L_max (words) of the length reward = max_new_tokens x words_per_token of the prompt's language.
    # 0 = measured per language (en, zh) with the policy tokenizer (rl/length.py); a number = that
    # figure for every language (the old single 0.7).
    rl.words_per_token = 0.0
    rl.rewards = ("length", "writing_rm", "format")
    rl.reward_weights = ()                 # () = equal weights
    rl.advantage = "longwriter_zero"       # longwriter_zero | grpo | dr_grpo | rloo
    rl.eps_low = 0.2
    rl.eps_high = None                     # e.g. 0.28 for DAPO-style clip-higher
    rl.beta = 0.0                          # KL to the frozen initial policy; 0 = off (paper)
    rl.loss_aggregation = "token_mean"     # token_mean | seq_mean_token_mean | constant (Dr. GRPO)
    rl.mask_truncated = False              # drop samples cut by max_new_tokens from the loss
    rl.truncation_warning = 0.05           # warn when more than this fraction of samples is truncated
    rl.updates_per_rollout = 1             # optimiser steps (minibatches) per rollout
    # log-prob kernel: auto (pallas on TPU, chunked on GPU/CPU) | chunked | pallas | reference
    rl.kernel = "auto"
    rl.rm_path = ""                        # trained Bradley-Terry RM (jaxwrite checkpoint / workdir)
    # Tokens per RM row: 0 = the RM's own max_seq_len; a number caps it. Answers longer than a row are
    # scored in chunks and pooled (rl/rm_scorer.py), never cut.
    rl.rm_max_len = 0
    # Rollout samples a person can read (<workdir>/rollout_samples.jsonl: prompt, plan, answer, each reward,
    # advantage): every N rollouts, the whole groups of the first `samples_prompts` prompts; 0 = never.
    rl.samples_every = 10
    rl.samples_prompts = 4
    rl.engine_max_batch = 64
    rl.engine_chunk_steps = 32
    # Recipes trained first (into <workdir>/policy_init and <workdir>/rm) when model.init_from / rm_path
    # are empty: a self-contained run from nothing but the corpora.
    rl.policy_recipe = ""
    rl.rm_recipe = ""
    rl.policy_recipe_steps = 0             # 0 = the recipe's own num_steps
    rl.policy_recipe_overrides = ()        # "key=value" overrides for the policy recipe, e.g. "data.max_chars=400"
    # Think/answer documents (rl/protocol_docs.py) mixed into the policy recipe's pretraining: the "own
    # long-CoT samples" slice of the LongWriter-Zero mix, so the protocol exists before the first rollout.
    rl.protocol_docs = 0                   # how many documents; 0 = none
    rl.protocol_weight = 0.01              # their share of the pretraining mix (paper: 1%)
    rl.rm_recipe_steps = 0
    return rl
