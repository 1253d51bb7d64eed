"""WritingBench critic SFT on Qwen2.5-7B-Instruct (the official critic's base), loss on the verdict JSON.

  jaxwrite data critic-data --verdicts teacher_verdicts.jsonl --output-dir critic_data   # prints N
  jaxwrite train --config configs/critic_sft_qwen2.5_7b.py:v5p-32 --workdir W \\
      --config.model.init_from=/path/to/Qwen2.5-7B-Instruct --config.tokenizer.path=/path/to/Qwen2.5-7B-Instruct \\
      --config.data.train_path=critic_data/train.jsonl --config.data.num_records=N

Paper settings (WritingBench critic): ~155K verdicts, AdamW, learning rate 7e-6, 3 epochs, batch 64,
4-step gradient accumulation. "Batch 64" is the global batch: 64 verdicts per optimizer step, made of
4 accumulated microbatches of 16 (`data.batch_size` is the global batch in jaxwrite; the trainer
splits it into `grad_accum_steps` microbatches). One verdict per row (data.pack=False), so a row is
an example and num_steps = floor(num_records × 3 / 64) (7,265 for 155,000 records), derived from
`data.num_records` (jaxwrite.train.defaults.steps_from_epochs), not fixed.
The schedule's warmup/cosine shape is jaxwrite's (the paper gives only the peak rate).

Targets: v5p-32 (16 chips, fsdp: a microbatch of 16 rows is one row per chip), v6e-16, one GPU (bf16
parameters + fp32 Adam moments, full remat: ~12 bytes/parameter ≈ 91 GB; 16 rows of 16k tokens do not
fit one H200, so "gpu" accumulates 64 microbatches of 1 row: the same global batch of 64, a
documented deviation from the 4-step accumulation). Benchmark-overlapping queries are refused
(--config.data.on_overlap=drop drops and counts them). `data.train_path` takes verdict records or the
rendered {messages} of `jaxwrite data critic-sft` (one format per file).
"""
from jaxwrite.train.defaults import base_config, sft_data, steps_from_epochs
from jaxwrite.train.meshes import target

PAPER_RECORDS = 155_000
PAPER_EPOCHS = 3
PAPER_BATCH = 64
PAPER_ACCUM = 4


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
    c.log_every = 10
    c.eval_every = 250
    c.checkpoint_every = 250
    c.optimizer.learning_rate = 7e-6   # AdamW (optax.adamw in jaxwrite.train.optim)
    c.optimizer.warmup_steps = 100
    c.optimizer.weight_decay = 0.0
    # WritingBench queries reach ~31k characters; 16k tokens holds the prompt, response and verdict.
    c.data = sft_data(seq_len=16384, batch_size=PAPER_BATCH)
    c.data.pack = False                # one verdict per row: batch 64 = 64 verdicts
    c.grad_accum_steps = PAPER_BATCH if hardware == "gpu" else PAPER_ACCUM
    steps_from_epochs(c, PAPER_RECORDS, PAPER_EPOCHS)
    return c
