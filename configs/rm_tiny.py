"""Bradley–Terry writing reward model, tiny backbone on CPU, on WritingPreferenceBench pairs.

Pairs: responses to the same prompt whose mean human scores differ by >= 1, split by prompt (10% of
prompts held out). Eval logs the held-out pairwise accuracy next to the length-only baseline
("prefer the longer response", on the same rows).
"""
from jaxwrite.train.defaults import base_config, preference_data


def get_config():
    c = base_config()
    c.objective = "bradley_terry"
    c.model.preset = "tiny"
    c.num_steps = 60
    c.log_every = 5
    c.eval_every = 30
    c.checkpoint_every = 30
    c.optimizer.learning_rate = 1e-3
    c.optimizer.warmup_steps = 5
    c.optimizer.weight_decay = 0.0
    c.data = preference_data(seq_len=512, batch_size=8)
    c.data.max_train_pairs = 2000   # a seeded sample keeps tokenisation to seconds on CPU
    c.data.max_eval_pairs = 256
    return c
