"""LongWriter-Zero style continual pretraining of Qwen2.5-32B base at 32k sequence length.

  jaxwrite train --config configs/cpt_qwen2.5_32b_32k.py:v5p-128 --workdir gs://.../cpt32b \\
      --config.model.init_from=/path/to/Qwen2.5-32B --config.tokenizer.path=/path/to/Qwen2.5-32B

Targets: v5p-128 (64 chips, fsdp 16 × tensor 4), v6e-256; "gpu" runs the same recipe scaled down to
Qwen2.5-1.5B at 8k on one GPU (32B at 32k does not fit one device). Mix: the LongWriter-Zero weights
(data_pipelines.mixtures), renormalised over the components present in data_dir.
"""
from jaxwrite.train.defaults import base_config, lm_data
from jaxwrite.train.meshes import target


def get_config(hardware: str = "v5p-128"):
    hw = target(hardware, ("v5p-128", "v6e-256", "gpu"))
    c = base_config()
    c.objective = "lm"
    one_gpu = hardware == "gpu"
    c.model.preset = "qwen2.5-1.5b" if one_gpu else "qwen2.5-32b"
    c.model.vocab_size = 151936 if one_gpu else 152064   # the checkpoint's (padded) vocabulary
    c.model.dtype = "bfloat16"
    c.model.remat = "full"
    c.tokenizer.train_files = ()                          # use the base model's tokenizer (tokenizer.path)
    c.mesh = hw.mesh
    c.num_steps = 10_000
    c.log_every = 10
    c.eval_every = 500
    c.checkpoint_every = 500
    c.optimizer.learning_rate = 1e-5
    c.optimizer.warmup_steps = 200
    c.optimizer.weight_decay = 0.1
    c.data = lm_data(seq_len=8192 if one_gpu else 32768, batch_size=8 if one_gpu else 64)
    # v5p-128: 4 microbatches of 16 rows (1 row of 32k tokens per fsdp shard). With 4 rows per chip
    # (one microbatch) the 64 saved layer inputs of full remat alone take ~86 GB, and 2 microbatches
    # still need 98 GiB of a chip's 95.74 (`jaxwrite compile`, docs/TPU.md). Same global batch.
    c.grad_accum_steps = 8 if one_gpu else 4 if hardware == "v5p-128" else 1
    c.data.eval_batches = 8
    return c
