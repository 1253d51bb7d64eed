"""Continual pretraining, tiny model, on this CPU in under 2 minutes with the shared corpora.

  jaxwrite train --config configs/cpt_tiny.py --workdir /tmp/cpt --config.num_steps=40

Tokenizer: a 4k SentencePiece trained on corpus_en + corpus_zh into <workdir>/tokenizer on the first run
(a few seconds; reused on resume). Held-out loss: two books kept out of training (data.eval_holdout).
"""
from jaxwrite.train.defaults import base_config, lm_data


def get_config():
    c = base_config()
    c.objective = "lm"
    c.model.preset = "tiny"
    c.num_steps = 60
    c.log_every = 5
    c.eval_every = 30
    c.checkpoint_every = 20
    c.optimizer.learning_rate = 3e-3
    c.optimizer.warmup_steps = 5
    c.data = lm_data(seq_len=256, batch_size=8)
    return c
