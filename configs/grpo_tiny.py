"""GRPO the LongWriter-Zero way on this CPU: a tiny policy, all three rewards, a length-control task.

  jaxwrite train --config configs/grpo_tiny.py --workdir /tmp/grpo

Self-contained: the policy starts from a short continual pretraining (configs/cpt_tiny.py with
think/answer documents, trained into <workdir>/policy_init on short documents, so it knows how to stop)
and the writing reward comes from a tiny Bradley-Terry RM on synthetic degraded-passage pairs
(configs/rm_tiny_degraded.py, trained into <workdir>/rm), both skipped when already there. Prompts ask for
20-60 words with the think/answer protocol; L_max of the length reward comes from the 128-token cap and
the tokenizer's measured words per token (rl/length.py). 200 steps fit the quickstart's budget; a small
KL penalty to the starting policy keeps this tiny policy from degenerating late in the run. Every run
behind these settings (step counts, group shapes, the KL sweep, what did not learn) is in
docs/BENCHMARKS.md, "GRPO with the think/answer protocol".
"""
from jaxwrite.rl.config import rl_config
from jaxwrite.train.defaults import base_config


def get_config():
    c = base_config()
    c.objective = "grpo"
    c.model.preset = "tiny"
    c.num_steps = 200
    c.log_every = 1
    c.checkpoint_every = 10
    # A cosine decay to a fifth: the rate stays high while the protocol is being learnt and falls as
    # the well-formed share nears its top (a constant rate let it fall back).
    c.optimizer.learning_rate = 5e-4
    c.optimizer.min_lr_ratio = 0.2
    c.optimizer.warmup_steps = 0
    c.optimizer.weight_decay = 0.0
    c.rl = rl_config()
    # 4 prompts x 16 samples (64 per step, as 8 x 8): a group of 16 holds a well-formed sample far more
    # often while the protocol is rare (0.85^8 = 27 % of groups of 8 have none at a 15 % share, 7 % of
    # groups of 16), so its z-scored advantages carry signal sooner.
    c.rl.prompts_per_step = 4
    c.rl.group_size = 16
    c.rl.max_new_tokens = 128
    c.rl.rm_max_len = 512
    c.rl.policy_recipe = "configs/cpt_tiny.py"
    c.rl.rm_recipe = "configs/rm_tiny_degraded.py"   # a signal a tiny RM can learn (rm_tiny: chance)
    # Short pretraining documents (paragraph groups of <= 400 characters, each closed by EOS) give the
    # policy a habit of stopping, so sample lengths vary within a group and the length reward has signal.
    c.rl.policy_recipe_overrides = ("data.max_chars=400",)
    # The LongWriter-Zero protocol (prompt ends in "<think>"; plan, then the answer inside <answer>). The
    # policy meets it in pretraining through think/answer documents (rl/protocol_docs.py): a share small
    # enough that it produces the protocol only now and then (a few percent of samples well-formed), so
    # GRPO has something to reinforce and room to show it learnt.
    c.rl.template = "base"
    c.rl.protocol_docs = 3000
    # The first-step well-formed share follows this weight: docs/BENCHMARKS.md, "GRPO with the think/answer protocol".
    c.rl.protocol_weight = 0.11
    c.rl.policy_recipe_steps = 300
    # Weights of (length, writing_rm, format) in the advantage. At this scale the RM mostly scores babble,
    # so it gets a quarter weight. All three agree on structure: a malformed sample has no answer (the
    # scorers' extraction rule), so it earns no length and ranks with the batch's worst answer for the RM.
    c.rl.reward_weights = (1.0, 0.25, 1.0)
    # KL to the starting policy (k3 estimator, per token). LongWriter-Zero trains without one; this tiny
    # policy needs it: with beta 0 it peaks and then collapses into babble that still scores. The sweep
    # (0, 0.02, 0.04, 0.10) is in docs/BENCHMARKS.md.
    c.rl.beta = 0.02
    return c
