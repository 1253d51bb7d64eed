"""Decode and prefill speed of jaxwrite's Engine beside transformers' `generate` (torch, same weights),
and score-logit mode (non-official) beside constrained JSON generation on the same judge prompts.

    python benchmarks/decode.py            # tiny + small, batch 1/8/32, prompt 256, 512 new tokens
    python benchmarks/decode.py --quick    # tiny only, batch 1/8, 128 new tokens, 8 judge prompts
    python benchmarks/decode.py --model DIR --contexts 512,1024,2048,4096,8192,16384 --batches 1,8,32

--model DIR: a real Hugging Face model directory, both sides loading the same files (transformers in
float32, jaxwrite with load_hf). Each context is the whole sequence (prompt + new tokens); a context past
the model's own (max_position_embeddings) runs on a random model of the same shape with the position
limit raised, built once with transformers and saved, so both sides still run identical weights.
Prefill and decode are timed in one generation per side: prefill = start to the first token (the
engine's first streamed text, transformers' first logits-processor call), decode = the remaining
new_tokens - 1 tokens per row. --max-cache-gib skips a (context, batch) whose KV cache would not fit.

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


# --- a real model over long contexts (--model) ------------------------------------------------------

class _Counting(_IdsOnly):
    """Decodes each id to one character, so streamed text (the engine's first-token clock) flows."""

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "x" * len(ids)


def same_shape_random(model_dir: str, max_positions: int, tmp: str) -> str:
    """A random model of model_dir's shape whose position limit is max_positions, saved in tmp (for
    contexts past the real model's own: both sides load these same weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.from_pretrained(model_dir)
    config.max_position_embeddings = max_positions
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    path = os.path.join(tmp, f"random-{max_positions}")
    model.save_pretrained(path, safe_serialization=True)
    return path


def kv_cache_gib(cfg, batch: int, slots: int) -> float:
    """Bytes of one side's float32 K and V for `batch` rows of `slots` positions, in GiB."""
    return 2 * cfg.num_layers * batch * cfg.num_kv_heads * slots * cfg.dim_head * 4 / 2 ** 30


def _prompts(vocab: int, batch: int, prompt_len: int) -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, vocab, prompt_len).tolist() for _ in range(batch)]


def engine_split(model, batch: int, prompt_len: int, new_tokens: int) -> dict:
    """Engine prefill and decode tok/s from one timed generation (after one untimed, compiling run)."""
    from jaxwrite.infer import Engine, GenerationRequest, SamplingParams
    engine = Engine(model, _Counting(model.cfg.vocab_size), max_batch=batch, eos_ids=[],
                    max_context=prompt_len + new_tokens)
    requests = [GenerationRequest(p, SamplingParams(temperature=0.0, max_new_tokens=new_tokens))
                for p in _prompts(model.cfg.vocab_size, batch, prompt_len)]
    first: list[float] = []
    on_text = lambda i, g, delta: first.append(time.perf_counter())  # noqa: E731
    for _ in engine.stream(requests, on_text):   # compiles every shape the timed run uses
        pass
    first.clear()
    start = time.perf_counter()
    for _ in engine.stream(requests, on_text):
        pass
    end = time.perf_counter()
    return _split(batch, prompt_len, new_tokens, start, first[0], end)


def _split(batch: int, prompt_len: int, new_tokens: int, start: float, first: float, end: float) -> dict:
    return {"prefill_tok_s": batch * prompt_len / (first - start),
            "decode_tok_s": batch * (new_tokens - 1) / max(end - first, 1e-9),
            "prefill_s": first - start, "decode_s": end - first, "peak_rss_mb": _peak_rss_mb()}


def hf_split(model, batch: int, prompt_len: int, new_tokens: int) -> dict:
    """transformers' generate, the same split (its first logits-processor call follows the prefill),
    with its static and its dynamic cache; the faster of each figure is kept."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    class Clock(LogitsProcessor):
        def __init__(self):
            self.first = None

        def __call__(self, input_ids, scores):
            self.first = self.first or time.perf_counter()
            return scores

    ids = torch.tensor(_prompts(model.config.vocab_size, batch, prompt_len))
    best: dict = {}
    for cache in ("static", "dynamic"):
        def gen(ids, n, clock=None, cache=cache):
            with torch.inference_mode():
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                               max_new_tokens=n, min_new_tokens=n, eos_token_id=None, pad_token_id=0,
                               cache_implementation=cache,
                               logits_processor=LogitsProcessorList([clock] if clock else []))
        gen(ids[:, :16], 2)   # warm-up: torch has nothing to compile, a short run suffices
        clock = Clock()
        start = time.perf_counter()
        gen(ids, new_tokens, clock)
        row = _split(batch, prompt_len, new_tokens, start, clock.first, time.perf_counter())
        for key in ("prefill_tok_s", "decode_tok_s"):
            if row[key] > best.get(key, 0.0):
                best[key], best[key.replace("tok_s", "cache")] = row[key], cache
        best["peak_rss_mb"] = row["peak_rss_mb"]
    return best


def bench_contexts(model_dir: str, contexts: list[int], batches: list[int], new_tokens: int,
                   max_cache_gib: float, tmp: str) -> list[dict]:
    """Engine beside transformers at every (context, batch); see the module docstring."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from jaxwrite.models import load_hf
    own = int(AutoConfig.from_pretrained(model_dir).max_position_embeddings)
    random_dir = same_shape_random(model_dir, max(contexts), tmp) if max(contexts) > own else None
    rows, loaded = [], {}
    for context in contexts:
        source = model_dir if context <= own else random_dir
        if source not in loaded:
            loaded.clear()   # one model pair in memory at a time
            loaded[source] = (load_hf(source), AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval())
        ours_model, hf_model = loaded[source]
        prompt_len = context - new_tokens
        for batch in batches:
            weights = "real" if source == model_dir else "random, same shape"
            gib = kv_cache_gib(ours_model.cfg, batch, context)
            if gib > max_cache_gib:
                print(f"context {context:6d} batch {batch:3d}: skipped (KV cache {gib:.1f} GiB > --max-cache-gib "
                      f"{max_cache_gib:g})", flush=True)
                rows.append({"context": context, "batch": batch, "skipped": f"KV cache {gib:.1f} GiB"})
                continue
            ours = engine_split(ours_model, batch, prompt_len, new_tokens)
            theirs = hf_split(hf_model, batch, prompt_len, new_tokens)
            row = {"context": context, "batch": batch, "prompt": prompt_len, "new_tokens": new_tokens,
                   "weights": weights, "jaxwrite": ours, "transformers": theirs, "load": os.getloadavg()[0],
                   "decode_ratio": ours["decode_tok_s"] / theirs["decode_tok_s"],
                   "prefill_ratio": ours["prefill_tok_s"] / theirs["prefill_tok_s"]}
            rows.append(row)
            print(f"context {context:6d} batch {batch:3d} ({weights}): decode {ours['decode_tok_s']:8.1f} vs "
                  f"{theirs['decode_tok_s']:8.1f} tok/s (x{row['decode_ratio']:.2f}); prefill "
                  f"{ours['prefill_tok_s']:8.1f} vs {theirs['prefill_tok_s']:8.1f} tok/s "
                  f"(x{row['prefill_ratio']:.2f}); load {row['load']:.1f}", flush=True)
    return rows


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
    parser.add_argument("--model", default=None,
                        help="a Hugging Face model dir: engine beside transformers at each of --contexts")
    parser.add_argument("--contexts", default="512,1024,2048,4096,8192,16384",
                        help="with --model: comma list of whole-sequence lengths (prompt + new tokens)")
    parser.add_argument("--max-cache-gib", type=float, default=6.0,
                        help="with --model: skip a (context, batch) whose float32 KV cache exceeds this")
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
    if args.model:
        with tempfile.TemporaryDirectory() as tmp:
            rows = bench_contexts(args.model, [int(c) for c in args.contexts.split(",")], batches,
                                  args.new_tokens or 64, args.max_cache_gib, tmp)
        print(json.dumps({"model": args.model, "load": os.getloadavg(), "contexts": rows}))
        return 0
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
