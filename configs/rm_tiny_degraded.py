"""Bradley–Terry reward model, tiny backbone on CPU, on SYNTHETIC degraded-passage pairs.

Why: the WritingPreferenceBench pairs (configs/rm_tiny.py) are too hard for a tiny model in a minute
of CPU (held-out accuracy ≈ chance), so they cannot show that reward-model training works at all.
Here chosen = a corpus passage and rejected = the same passage degraded (sentences shuffled, words
scrambled, a sentence repeated, or cut mid-sentence; data_pipelines.degraded_pairs), built from the
corpora in the data dir at start-up. Eval holds out whole books; the length-only baseline sits near 0.5
by construction. Report its accuracy as synthetic, beside the real-data (WritingPreferenceBench) row.
"""
from jaxwrite.train.defaults import base_config, degraded_pair_data


def get_config():
    c = base_config()
    c.objective = "bradley_terry"
    c.model.preset = "tiny"
    c.num_steps = 80
    c.log_every = 10
    c.eval_every = 40
    c.checkpoint_every = 40
    c.optimizer.learning_rate = 1e-3
    c.optimizer.warmup_steps = 10
    c.optimizer.weight_decay = 0.0
    c.data = degraded_pair_data(seq_len=128, batch_size=16)
    # Sentence shuffles stay at chance for a model this small in this few steps; they are left out so
    # the run measures what it can learn (the builder still makes them: --config.data.degradations).
    c.data.degradations = ("scramble", "repeat", "truncate")
    c.data.max_eval_pairs = 256
    return c
