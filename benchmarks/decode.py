"""Decode and prefill speed of jaxwrite's Engine beside transformers' `generate` (torch, same weights),
and score-logit mode (non-official) beside constrained JSON generation on the same judge prompts.

    python benchmarks/decode.py            # tiny + small, batch 1/8/32, prompt 256, 512 new tokens
    python benchmarks/decode.py --quick    # tiny only, batch 1/8, 128 new tokens, 8 judge prompts

Weights: a random Qwen2 model is built with transformers, saved with save_pretrained and loaded with
jaxwrite's load_hf, so both sides run identical weights. Both decode greedily with no EOS, so every row
generates exactly the requested tokens. transformers runs with its static and its dynamic cache and the
faster of the two is reported. Each side runs once to
warm up (jit compile / allocator) and once timed. Decode time = total − prefill-only time (the same
generation with one new token).
Peak memory is the process's peak RSS after each side (ours runs first; RSS never goes down, so the
transformers figure is an upper bound that includes ours). The last line is a JSON summary.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

import numpy as np


class _IdsOnly:
    """Tokenizer stand-in for the throughput runs: random token ids need no text (decoded to '')."""
    eos_ids: tuple[int, ...] = ()

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return ""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _hf_model(preset: str, max_len: int, tmp: str):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from jaxwrite.models import get_preset
    cfg = get_preset(preset)
    hf_cfg = Qwen2Config(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.num_layers,
                         num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
                         intermediate_size=cfg.d_ff, tie_word_embeddings=cfg.tie_embeddings,
                         rope_theta=cfg.rope_theta, rms_norm_eps=cfg.rms_eps,
                         max_position_embeddings=max(max_len, cfg.max_seq_len))
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(hf_cfg).eval()
    path = os.path.join(tmp, preset)
    model.save_pretrained(path, safe_serialization=True)
    return model, path


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_engine(path: str, batch: int, prompt_len: int, new_tokens: int) -> dict:
    from jaxwrite.infer import Engine, GenerationRequest, SamplingParams
    from jaxwrite.models import load_hf
    model = load_hf(path)
    engine = Engine(model, _IdsOnly(model.cfg.vocab_size), max_batch=batch, eos_ids=[],
                    max_context=prompt_len + new_tokens + 1)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, model.cfg.vocab_size, prompt_len).tolist() for _ in range(batch)]
    requests = [GenerationRequest(p, SamplingParams(temperature=0.0, max_new_tokens=new_tokens)) for p in prompts]
    # Prefill-only: the same engine path with one new token (so the same prefill shapes as `requests`).
    first = [GenerationRequest(p, SamplingParams(temperature=0.0, max_new_tokens=1)) for p in prompts]
    engine.generate(requests)                 # compile every bucket this run uses
    engine.generate(first)
    prefill = _time(lambda: engine.generate(first))
    total = _time(lambda: engine.generate(requests))
    decode = max(total - prefill, 1e-9)
    return {"prefill_tok_s": batch * prompt_len / prefill, "decode_tok_s": batch * new_tokens / decode,
            "total_s": total, "peak_rss_mb": _peak_rss_mb()}


def bench_hf(model, batch: int, prompt_len: int, new_tokens: int) -> dict:
    import torch
    rng = np.random.default_rng(0)
    ids = torch.tensor(rng.integers(0, model.config.vocab_size, (batch, prompt_len)))
    mask = torch.ones_like(ids)

    def gen(n, cache):
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
                           min_new_tokens=n, eos_token_id=None, pad_token_id=0, cache_implementation=cache)
    best = None
    for cache in ("static", "dynamic"):   # report transformers' faster cache on this machine
        gen(8, cache)
        prefill = _time(lambda cache=cache: gen(1, cache))
        total = _time(lambda cache=cache: gen(new_tokens, cache))
        decode = max(total - prefill, 1e-9)
        row = {"cache": cache, "prefill_tok_s": batch * prompt_len / prefill,
               "decode_tok_s": batch * new_tokens / decode, "total_s": total, "peak_rss_mb": _peak_rss_mb()}
        if best is None or row["decode_tok_s"] > best["decode_tok_s"]:
            best = row
    return best


def judge_prompts(data_dir: str, count: int) -> list[list[dict]]:
    """[system, user] critic messages for English WritingBench queries (shortened to fit the tiny context)."""
    from jaxwrite.evals import load_writingbench
    from jaxwrite.prompts import critic_messages
    queries = [q for q in load_writingbench(data_dir).values() if q.lang == "en"]
    out = []
    for i in range(count):
        q = queries[i % len(queries)]
        criterion = q.checklist[i % len(q.checklist)]
        out.append(critic_messages(q.query[:300], criterion, "A short response. " * 10))
    return out


def bench_judge(tmp: str, data_dir: str, count: int, max_tokens: int = 256, model_dir: str | None = None,
                batch: int = 32) -> dict:
    """Score-logit (non-official) vs constrained JSON generation on the same judge prompts.

    With `model_dir` (a jaxwrite checkpoint or HF dir, e.g. a continual-pretraining run) the judge writes
    prose reasons that end where the model closes the string; without it a random tiny model is built.
    The ratio is bounded by (prefill + reason decoding) / prefill, so the mean prompt and reason token
    counts are reported beside it, with the per-token costs that decide it.
    """
    from flax import nnx

    from jaxwrite.evals.writingbench_critic import VERDICT_SCHEMA
    from jaxwrite.infer import Engine, GenerationRequest, SamplingParams, ScoreReader, load_for_inference
    from jaxwrite.models import Transformer, get_preset
    from jaxwrite.text import train_sentencepiece
    from jaxwrite.common.data_dir import benchmark_dir
    if model_dir:
        model, tokenizer = load_for_inference(model_dir)
    else:
        corpus = sorted(str(p) for p in benchmark_dir(data_dir, "corpus_en").glob("pg*.txt"))[:2]
        tokenizer = train_sentencepiece(corpus, os.path.join(tmp, "sp"), vocab_size=2048, input_sentence_size=20000)
        model = Transformer(get_preset("tiny", vocab_size=tokenizer.vocab_size, max_seq_len=4096), nnx.Rngs(0))
    # The critic prompts run to ~2,500 tokens with a 4k-piece tokenizer; RoPE positions extend past a
    # tiny model's 2,048 training context, which is fine for a speed comparison.
    engine = Engine(model, tokenizer, max_batch=batch, max_context=4096)
    reader = ScoreReader(engine)
    messages = judge_prompts(data_dir, count)
    score_prompts = [reader.prompt_ids(m) for m in messages]
    gen_requests = [GenerationRequest(tokenizer.encode_chat(m), SamplingParams(temperature=1.0, top_p=0.95,
                                                                               max_new_tokens=max_tokens, seed=i),
                                      json_schema=VERDICT_SCHEMA) for i, m in enumerate(messages)]
    reader.read(score_prompts)            # warm-up: compile every shape the timed runs use
    engine.generate(gen_requests)
    logit_s = _time(lambda: reader.read(score_prompts))
    results = []
    gen_s = _time(lambda: results.extend(engine.generate(gen_requests)))
    errors = [c.error for (c,) in results if c.error]
    if errors:
        raise SystemExit(f"{len(errors)} judge requests failed, e.g.: {errors[0]}")
    parsed = sum(1 for (c,) in results if _parses(c.text))
    prompt_tokens = float(np.mean([len(p) for p in score_prompts]))
    reason_tokens = float(np.mean([len(c.token_ids) for (c,) in results]))
    return {"prompts": count, "judge": model_dir or "random tiny", "mean_prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens, "score_logit_s": logit_s, "constrained_generate_s": gen_s,
            "speedup": gen_s / logit_s, "constrained_parsed": parsed, "constrained_mean_tokens": reason_tokens,
            # Seconds per prompt token (prefill) and per generated token (decode), amortised over the batch.
            "prefill_s_per_token": logit_s / (count * prompt_tokens),
            "decode_s_per_token": max(gen_s - logit_s, 0.0) / (count * reason_tokens)}


def _parses(text: str) -> bool:
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return isinstance(v.get("score"), int) and 1 <= v["score"] <= 10 and isinstance(v.get("reason"), str)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--presets", default=None, help="comma list (default tiny,small; --quick: tiny)")
    parser.add_argument("--batches", default=None, help="comma list (default 1,8,32; --quick: 1,8)")
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--judge-prompts", type=int, default=None)
    parser.add_argument("--skip-judge", action="store_true")
    parser.add_argument("--judge-only", action="store_true", help="skip the decode comparison")
    parser.add_argument("--judge-model", default=None,
                        help="trained judge model dir (jaxwrite checkpoint or HF); default: a random tiny model")
    parser.add_argument("--data-dir", default=None,
                        help="data root holding writingbench/ and corpus_en/ (for the judge comparison; default: "
                             "the data-dir rule of jaxwrite.common.data_dir)")
    args = parser.parse_args(argv)
    presets = (args.presets or ("tiny" if args.quick else "tiny,small")).split(",")
    batches = [int(b) for b in (args.batches or ("1,8" if args.quick else "1,8,32")).split(",")]
    new_tokens = args.new_tokens or (128 if args.quick else 512)
    judge_count = args.judge_prompts or (8 if args.quick else 100)
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    summary = {"prompt_len": args.prompt_len, "new_tokens": new_tokens, "decode": []}
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ([] if args.judge_only else presets):
            hf_model, path = _hf_model(preset, args.prompt_len + new_tokens + 1, tmp)
            for batch in batches:
                ours = bench_engine(path, batch, args.prompt_len, new_tokens)
                theirs = bench_hf(hf_model, batch, args.prompt_len, new_tokens)
                row = {"preset": preset, "batch": batch, "jaxwrite": ours, "transformers": theirs,
                       "decode_speedup": ours["decode_tok_s"] / theirs["decode_tok_s"]}
                summary["decode"].append(row)
                print(f"{preset:5s} batch {batch:3d}: decode {ours['decode_tok_s']:9.1f} tok/s vs "
                      f"{theirs['decode_tok_s']:9.1f} (x{row['decode_speedup']:.2f}); prefill "
                      f"{ours['prefill_tok_s']:9.1f} vs {theirs['prefill_tok_s']:9.1f} tok/s", flush=True)
        if not args.skip_judge:
            summary["judge"] = bench_judge(tmp, args.data_dir, judge_count, model_dir=args.judge_model)
            j = summary["judge"]
            print(f"judge x{j['prompts']}: score-logit {j['score_logit_s']:.2f}s vs constrained "
                  f"{j['constrained_generate_s']:.2f}s (x{j['speedup']:.1f}); parsed {j['constrained_parsed']}; "
                  f"prompt {j['mean_prompt_tokens']:.0f} tok, reason {j['constrained_mean_tokens']:.0f} tok",
                  flush=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
