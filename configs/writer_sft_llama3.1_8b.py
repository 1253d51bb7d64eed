"""Writer SFT of Llama-3.1-8B-Instruct on critic-filtered data (WritingBench §3.3), TPU pod slice.

  jaxwrite train --config configs/writer_sft_llama3.1_8b.py:v5p-32 --workdir gs://BUCKET/writer_sft_llama8b \
      --config.model.init_from=/path/Llama-3.1-8B-Instruct --config.tokenizer.path=/path/Llama-3.1-8B-Instruct \
      --config.data.train_path=/path/sft/kept.jsonl

Same recipe and targets as configs/writer_sft_qwen2.5_7b.py (jaxwrite's choices of learning rate, steps
and batch; v5p-32 (default) / v4-32 with FSDP over every chip, bf16 compute, full remat, 64 packed rows
of 8,192 tokens, in 2 microbatches on v4-32; "gpu": bf16 parameters, 64 accumulated microbatches of one row).
"""
from jaxwrite.train.defaults import base_config, sft_data
from jaxwrite.train.meshes import target

TARGETS = ("v5p-32", "v4-32", "gpu")


def get_config(hardware: str = "v5p-32"):
    target(hardware, TARGETS)
    one_gpu = hardware == "gpu"
    c = base_config()
    c.objective = "sft"
    c.model.preset = "llama-3.1-8b"
    c.model.init_from = ""               # required: the Hugging Face directory of Llama-3.1-8B-Instruct
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
