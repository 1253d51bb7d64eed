"""WritingBench critic SFT on Qwen2.5-7B-Instruct (the official critic's base), loss on the verdict JSON.

  jaxwrite train --config configs/critic_sft_qwen2.5_7b.py:v5p-32 --workdir W \\
      --config.model.init_from=/path/to/Qwen2.5-7B-Instruct --config.tokenizer.path=/path/to/Qwen2.5-7B-Instruct \\
      --config.data.train_path=critic_train.jsonl

Targets: v5p-32 (16 chips, fsdp), v6e-16, one GPU (bf16 parameters + fp32 Adam moments, full remat:
~12 bytes/parameter ≈ 91 GB, fits an H200's 141 GB). Benchmark-overlapping queries are refused.
"""
from jaxwrite.train.defaults import base_config, sft_data
from jaxwrite.train.meshes import target


def get_config(hardware: str = "v5p-32"):
    hw = target(hardware, ("v5p-32", "v6e-16", "gpu"))
    c = base_config()
    c.objective = "critic_sft"
    c.model.preset = "qwen2.5-7b"
    c.model.vocab_size = 152064   # the checkpoint's padded vocabulary (the tokenizer has fewer ids)
    c.model.dtype = "bfloat16"
    c.model.param_dtype = "bfloat16" if hardware == "gpu" else "float32"
    c.model.remat = "full"
    c.tokenizer.train_files = ()
    c.mesh = hw.mesh
    c.num_steps = 3000
    c.log_every = 10
    c.eval_every = 250
    c.checkpoint_every = 250
    c.optimizer.learning_rate = 1e-5
    c.optimizer.warmup_steps = 100
    c.optimizer.weight_decay = 0.0
    # WritingBench queries reach ~31k characters; 16k tokens holds the prompt, response and verdict.
    c.data = sft_data(seq_len=16384, batch_size=32)
    c.grad_accum_steps = 32 if hardware == "gpu" else 2
    return c
