"""LongWriter-Zero GRPO at the paper's settings: Qwen2.5-32B base policy, Qwen2.5-72B-backbone Bradley–Terry
writing RM, 32 prompts x 32 samples, T 0.8, top-p 1.0, eps 0.2, beta 0, up to 14,000 new tokens.

  jaxwrite train --config configs/grpo_longwriter_zero_32b.py:v5p-128 --workdir /mnt/runs/lwz \\
      --config.model.init_from=/path/to/cpt-32b --config.tokenizer.path=/path/to/Qwen2.5-32B \\
      --config.rl.rm_path=/path/to/rm-72b --config.rl.prompts=/path/to/rl_prompts.jsonl

  jaxwrite train --config configs/grpo_longwriter_zero_32b.py:gpu ...   # one GPU: Qwen2.5-0.5B policy

Prompts: jsonl {id, prompt[, lower, upper]} (`jaxwrite prep long-form` writes it); ranges missing from a line
come from explicit requests ("about 3,000 words" -> [2700, 3300]). The learning rate and step count are
jaxwrite's choices (the paper does not publish them). "gpu" scales the recipe to one device: a 0.5B policy,
8 prompts x 8 samples, 4,096 new tokens, with a reward model of the user's choice.
"""
from jaxwrite.rl.config import rl_config
from jaxwrite.train.defaults import base_config
from jaxwrite.train.meshes import target


def get_config(hardware: str = "v5p-128"):
    hw = target(hardware, ("v5p-128", "v6e-256", "gpu"))
    one_gpu = hardware == "gpu"
    c = base_config()
    c.objective = "grpo"
    c.model.preset = "qwen2.5-0.5b" if one_gpu else "qwen2.5-32b"
    c.model.vocab_size = 151936 if one_gpu else 152064
    c.model.dtype = "bfloat16"
    c.model.remat = "full"
    c.tokenizer.train_files = ()          # the base model's tokenizer (tokenizer.path)
    c.mesh = hw.mesh
    c.num_steps = 500
    c.log_every = 1
    c.checkpoint_every = 10
    c.optimizer.learning_rate = 1e-6
    c.optimizer.warmup_steps = 10
    c.optimizer.weight_decay = 0.0
    c.rl = rl_config()
    c.rl.prompts = ""                     # required: the RL prompt file
    if one_gpu:
        c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens = 8, 8, 4096
    c.rl.engine_max_batch = 64 if one_gpu else 256
    # The paper's loop is synchronous, on-policy GRPO without DAPO's additions; each is one line to turn on
    # (docs/GRPO.md): rollouts generated beside training (rl.max_staleness = 1, with truncated importance
    # weights), long samples continued across steps (rl.partial_rollout_tokens), and the DAPO set of Yu
    # et al. 2025 (arXiv:2503.14476): dynamic sampling, the overlong soft punishment in tokens (e.g. a
    # 4,000-token buffer), clip-higher (rl.eps_high = 0.28); token_mean is already the aggregation.
    c.rl.max_staleness = 0
    c.rl.partial_rollout_tokens = 0
    c.rl.dynamic_sampling = False
    c.rl.overlong_buffer = 0
    c.rl.eps_high = None
    # The update sees all 32 x 32 rows of up to 14k new tokens at once: microbatches of 2 rows per
    # fsdp shard on v5p-128 (32 of 32 rows), 1 per shard on v6e-256 (16 of 64), so the saved layer
    # inputs of the full-remat backward stay ~20 GB a chip. Gradients still average over all 1,024.
    c.grad_accum_steps = 1 if one_gpu else 32 if hardware == "v5p-128" else 16
    return c
