"""GRPO the LongWriter-Zero way on this CPU: a tiny policy, all three rewards, a length-control task.

  jaxwrite train --config configs/grpo_tiny.py --workdir /tmp/grpo

Self-contained: the policy starts from a short continual pretraining (configs/cpt_tiny.py, trained into
<workdir>/policy_init on short documents, so it knows how to stop) and the writing reward comes from a tiny Bradley-Terry RM (configs/rm_tiny.py,
trained into <workdir>/rm), both skipped when already there. Prompts ask for 20-60 words; the
generation cap is 96 tokens, so L_max of the length reward is 96 x 0.7 = 67 words. Measured: the mean
length reward rises from 0.55 (steps 1-10) to 0.64 (steps 41-50); see docs/BENCHMARKS.md.
"""
from jaxwrite.rl.config import rl_config
from jaxwrite.train.defaults import base_config


def get_config():
    c = base_config()
    c.objective = "grpo"
    c.model.preset = "tiny"
    c.num_steps = 50
    c.log_every = 1
    c.checkpoint_every = 10
    c.optimizer.learning_rate = 1e-4
    c.optimizer.warmup_steps = 0
    c.optimizer.weight_decay = 0.0
    c.rl = rl_config()
    c.rl.prompts_per_step = 8
    c.rl.group_size = 8
    c.rl.max_new_tokens = 96
    c.rl.rm_max_len = 512
    c.rl.policy_recipe = "configs/cpt_tiny.py"
    c.rl.rm_recipe = "configs/rm_tiny.py"
    # Short pretraining documents (paragraph groups of <= 400 characters, each closed by EOS) give the
    # policy a habit of stopping, so sample lengths vary within a group and the length reward has signal.
    c.rl.policy_recipe_overrides = ("data.max_chars=400",)
    # A 2-layer, d_model-64 policy after 150 pretraining steps does not produce the <think>/<answer>
    # protocol even with 30-60% think/answer documents in its mix (measured: 0% well-formed samples, so
    # every reward is constant within its group and GRPO has no signal). The tiny recipe therefore uses
    # the plain template: the whole completion is the answer; the format reward still runs (structure 0,
    # minus the repetition penalty). Real-size recipes keep the LongWriter-Zero protocol ("base").
    c.rl.template = "plain"
    return c
