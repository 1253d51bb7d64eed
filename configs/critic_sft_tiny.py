"""Critic SFT (WritingBench critic format), tiny model on CPU.

  jaxwrite train --config configs/critic_sft_tiny.py --workdir /tmp/critic \\
      --config.data.train_path=critic_train.jsonl [--config.data.eval_path=critic_eval.jsonl]

Records, one format per file: verdicts {query, response, criterion, score, reason}
(`jaxwrite data critic-data`'s train.jsonl) or rendered {messages: [system, user, assistant]}
(`jaxwrite data critic-sft` output, critic-data's train.messages.jsonl). Training queries that overlap a
WritingBench benchmark query are refused (--config.data.on_overlap=drop drops and counts them instead;
--config.data.allow_overlap=True keeps them, as WritingBench's own critic did).
"""
from jaxwrite.train.defaults import base_config, sft_data


def get_config():
    c = base_config()
    c.objective = "critic_sft"
    c.model.preset = "tiny"
    c.num_steps = 40
    c.log_every = 5
    c.eval_every = 20
    c.checkpoint_every = 20
    c.optimizer.learning_rate = 1e-3
    c.optimizer.warmup_steps = 4
    c.data = sft_data(seq_len=1024, batch_size=8)
    c.data.on_long = "split"   # tiny context: long critic prompts are split rather than refused
    return c
