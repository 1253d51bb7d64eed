"""Writer SFT on critic-filtered data (WritingBench §3.3), tiny model, on this CPU in a few minutes.

  jaxwrite prep filter ... --output-dir /tmp/prep/sft          # kept.jsonl (top 50% per subdomain)
  jaxwrite train --config configs/writer_sft_tiny.py --workdir /tmp/writer_sft \
      --config.data.train_path=/tmp/prep/sft/kept.jsonl [--config.data.eval_path=/tmp/prep/sft/all.jsonl]

Records are {query, response} (plus provenance); the query is one user turn, the loss covers the
response only, and rows are packed. The contamination guard refuses records overlapping WritingBench
queries. Long responses are split across rows here (the tiny model has a short context); the TPU
configs refuse them instead.
"""
from jaxwrite.train.defaults import base_config, sft_data


def get_config():
    c = base_config()
    c.objective = "sft"
    c.model.preset = "tiny"
    c.num_steps = 40
    c.log_every = 5
    c.eval_every = 20
    c.checkpoint_every = 20
    c.optimizer.learning_rate = 1e-3
    c.optimizer.warmup_steps = 4
    c.data = sft_data(seq_len=512, batch_size=8)
    c.data.on_long = "split"
    c.data.eval_batches = 4
    return c
