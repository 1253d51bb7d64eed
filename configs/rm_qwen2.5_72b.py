"""Bradley–Terry writing reward model on a Qwen2.5-72B backbone (as in LongWriter-Zero), scalar head.

  jaxwrite train --config configs/rm_qwen2.5_72b.py:v5p-128 --workdir W \\
      --config.model.init_from=/path/to/Qwen2.5-72B-Instruct --config.tokenizer.path=/path/to/Qwen2.5-72B-Instruct

The head is initialised fresh when the backbone comes from a causal-LM checkpoint. Targets: v5p-128
(64 chips, fsdp 16 × tensor 4), v6e-256 (256 chips, fsdp 64 × tensor 4); "gpu" trains the same recipe
on a Qwen2.5-7B backbone (a 72B model with Adam state needs ~1.2 TB and does not fit one device).
"""
from jaxwrite.train.defaults import base_config, preference_data
from jaxwrite.train.meshes import target


def get_config(hardware: str = "v5p-128"):
    hw = target(hardware, ("v5p-128", "v6e-256", "gpu"))
    c = base_config()
    c.objective = "bradley_terry"
    one_gpu = hardware == "gpu"
    c.model.preset = "qwen2.5-7b" if one_gpu else "qwen2.5-72b"
    c.model.vocab_size = 152064
    c.model.dtype = "bfloat16"
    c.model.param_dtype = "bfloat16" if one_gpu else "float32"
    c.model.remat = "full"
    c.tokenizer.train_files = ()
    # v6e-256: fsdp over 64 chips (no data axis). With the target's (4, 16, 4) the fp32 weights and Adam
    # moments are sharded only 64-way and replicated 4 times: 13.6 GB of a v6e chip's 32 GB before any
    # activation (the compiler asked for 40.9 GB of temporaries on top).
    c.mesh = (1, 64, 4) if hardware == "v6e-256" else hw.mesh
    c.num_steps = 2000
    c.log_every = 10
    c.eval_every = 200
    c.checkpoint_every = 200
    c.optimizer.learning_rate = 2e-6
    c.optimizer.warmup_steps = 50
    c.optimizer.weight_decay = 0.0
    c.data = preference_data(seq_len=8192, batch_size=64)
    # v5p-128: 4 microbatches of 16 pairs (32 rows, 2 per fsdp shard): the 80 saved layer inputs of a
    # full-remat step at 8 rows per chip (one microbatch) would alone take ~86 GB of a chip's 95 GiB.
    # v6e-256: one microbatch, the 128 rows one pair per fsdp shard: 31.5 of 32 GiB per chip (a thin
    # margin). Two microbatches would need 20.8 GiB, but 32 pairs do not split over 64 shards (each
    # host feeds whole pairs), and fsdp 32 x tensor 8 with two needs 32.8 GiB. Same global batch of 64
    # pairs everywhere.
    c.grad_accum_steps = 64 if one_gpu else 4 if hardware == "v5p-128" else 1
    return c
