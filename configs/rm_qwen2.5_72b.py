"""Bradley–Terry writing reward model on a Qwen2.5-72B backbone (as in LongWriter-Zero), scalar head.

  jaxwrite train --config configs/rm_qwen2.5_72b.py:v5p-128 --workdir W \\
      --config.model.init_from=/path/to/Qwen2.5-72B-Instruct --config.tokenizer.path=/path/to/Qwen2.5-72B-Instruct

The head is initialised fresh when the backbone comes from a causal-LM checkpoint. Targets: v5p-128
(64 chips, fsdp 16 × tensor 4), v6e-256; "gpu" trains the same recipe on a Qwen2.5-7B backbone
(a 72B model with Adam state needs ~1.2 TB and does not fit one device).
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
    c.mesh = hw.mesh
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
    # Same global batch of 64 pairs. v6e-256 spreads one microbatch over all 64 data x fsdp shards.
    c.grad_accum_steps = 64 if one_gpu else 4 if hardware == "v5p-128" else 1
    return c
