"""Writer SFT of Qwen2.5-7B-Instruct on critic-filtered data (WritingBench §3.3), TPU pod slice.

  jaxwrite train --config configs/writer_sft_qwen2.5_7b.py:v5p-32 --workdir gs://BUCKET/writer_sft_qwen7b \
      --config.model.init_from=/path/Qwen2.5-7B-Instruct --config.tokenizer.path=/path/Qwen2.5-7B-Instruct \
      --config.data.train_path=/path/sft/kept.jsonl

Targets: v5p-32 (the default) and v4-32, 16 chips each, with FSDP over every chip of the slice: bf16
compute, fp32 master weights, full rematerialisation, 64 packed rows of 8,192 tokens per step (on v4-32
in 2 microbatches, for its 32 GiB chips); "gpu":
one H100/H200-class GPU with bf16 parameters (+ fp32 Adam moments, ~12 bytes/parameter ≈ 91 GB) that
accumulates 64 microbatches of one row (the same global batch). The mesh stays (1, -1, 1), so the recipe
also runs on any other slice or GPU count. Learning rate, steps and batch are jaxwrite's choices, not
the paper's (it does not publish them); ~12k kept responses of a few thousand tokens are about 3 epochs
in 600 steps. Records longer than a row are refused, not split.
"""
from jaxwrite.train.defaults import base_config, sft_data
from jaxwrite.train.meshes import target

TARGETS = ("v5p-32", "v4-32", "gpu")


def get_config(hardware: str = "v5p-32"):
    target(hardware, TARGETS)
    one_gpu = hardware == "gpu"
    c = base_config()
    c.objective = "sft"
    c.model.preset = "qwen2.5-7b"
    c.model.init_from = ""               # required: the Hugging Face directory of Qwen2.5-7B-Instruct
    c.model.dtype = "bfloat16"
    c.model.param_dtype = "bfloat16" if one_gpu else "float32"
    c.model.remat = "full"
    c.tokenizer.path = ""                # required: the same directory (its tokenizer and chat template)
    c.mesh = (1, -1, 1)                  # (data, fsdp, tensor): FSDP over every chip of the slice
    c.num_steps = 600
    c.log_every = 10
    c.eval_every = 100
    c.checkpoint_every = 100
    c.optimizer.learning_rate = 1e-5
    c.optimizer.warmup_steps = 30
    c.optimizer.weight_decay = 0.0
    c.data = sft_data(seq_len=8192, batch_size=64)
    # v4-32 (32 GiB chips): 2 microbatches of 32 rows; one microbatch compiles to 27.6 (7B) / 30.9 (8B) GiB.
    c.grad_accum_steps = 64 if one_gpu else 2 if hardware == "v4-32" else 1
    c.data.eval_batches = 8
    return c
