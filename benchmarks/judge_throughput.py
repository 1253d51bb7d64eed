"""The engine as a judge on a real instruct model, beside transformers, same prompts, same run: verdicts/s
in generate mode and in score-logit mode (issue 27 §4).

Model: SmolLM2-135M-Instruct (Q4_1 GGUF, the suite's pinned real model, dequantized to float32 on both
sides; `--gguf` takes another file). Prompts: real WritingBench critic requests (official messages: the
query, one of its criteria, a response) built by `jaxwrite.evals.critic_request`, the response a public-domain
passage from the shared English corpus, so each prompt is about `--prompt-tokens` long.

* jaxwrite, generate:    `LocalJudge(mode="generate").chat(requests)`: the official sampling (temperature 1.0,
                         top_p 0.95), new tokens capped at `--new-tokens` (the official budget, 2,048, is
                         minutes per batch on two cores);
* transformers, generate: `model.generate` on the same chat-templated prompts, left-padded, the same sampling
                         and cap;
* jaxwrite, score_logit: `LocalJudge(mode="score_logit").chat(requests)`: one prefill of prompt + `{"score": `
                         + "1" reads the score distribution;
* transformers, score_logit: one forward pass over the same ids, the same reading rule (jaxwrite's score-token
                         tables) on its logits; the two argmax scores are compared.

Each of the four runs is warmed once (jaxwrite compiles its buckets), then the four are timed in turn,
`--repeats` rounds (median), so the shared machine's load falls on both sides alike. All prompts are one
batch on both sides. Verdicts/s = prompts / seconds; generate also reports completion tokens/s,
since sampled lengths differ.

    python benchmarks/judge_throughput.py [--prompts 8] [--new-tokens 64] [--repeats 2] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def _prompts(count: int, prompt_words: int, data_dir: str | None):
    from jaxwrite.common.data_dir import benchmark_dir
    from jaxwrite.evals import critic_request, load_writingbench

    queries = load_writingbench(data_dir)
    corpus = (benchmark_dir(data_dir, "corpus_en") / "pg1342.txt").read_text(encoding="utf-8").split()
    # Short English queries, so the response passage sets the prompt's length.
    chosen = sorted((q for q in queries.values() if q.lang == "en"), key=lambda q: len(q.query))[:count]
    requests = []
    for n, q in enumerate(chosen):
        start = 2000 + 1500 * n
        response = " ".join(corpus[start:start + prompt_words])
        requests.append(critic_request(q.query, q.checklist[n % 5], response, seed=n))
    return requests


def _interleaved(runs: dict, repeats: int) -> dict:
    """{name: (median seconds, last output)}: each run warmed once (jaxwrite compiles its buckets; the
    allocator and kernels settle on both sides), then timed in turn, round after round, so a change in the
    machine's load falls on both sides alike."""
    for fn in runs.values():
        fn()
    times = {name: [] for name in runs}
    outs = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            began = time.perf_counter()
            outs[name] = fn()
            times[name].append(time.perf_counter() - began)
    return {name: (statistics.median(times[name]), outs[name]) for name in runs}


def _jaxwrite_runs(gguf: str, requests, new_tokens: int):
    """The two LocalJudge modes as timed calls, and the score reader (the rule both sides read scores by)."""
    import dataclasses

    from jaxwrite.evals import LocalJudge
    from jaxwrite.infer import ScoreReader

    capped = [dataclasses.replace(r, sampling=dataclasses.replace(r.sampling, max_new_tokens=new_tokens))
              for r in requests]
    generate = LocalJudge(model=gguf, mode="generate", max_batch=len(requests))
    logit = LocalJudge(model=gguf, mode="score_logit", max_batch=len(requests))
    return ({"jaxwrite generate": lambda: generate.chat(capped),
             "jaxwrite score_logit": lambda: logit.chat(capped)}, ScoreReader(logit.engine))


def _jaxwrite_figures(requests, timed: dict) -> dict:
    from jaxwrite.evals import parse_critic_output

    out = {}
    for mode in ("generate", "score_logit"):
        seconds, results = timed[f"jaxwrite {mode}"]
        tokens = sum(r.completion_tokens or 0 for r in results)
        out[mode] = {"seconds": seconds, "verdicts_per_s": len(requests) / seconds,
                     "completion_tokens": tokens, "completion_tokens_per_s": tokens / seconds,
                     "prompt_tokens": [r.prompt_tokens for r in results],
                     "parsed": sum(parse_critic_output(r.text) is not None for r in results),
                     "errors": [r.error for r in results if r.error]}
    out["score_logit"]["scores"] = [json.loads(r.text)["score"] for r in timed["jaxwrite score_logit"][1]]
    return out


def _transformers_runs(gguf: str, requests, new_tokens: int, reader):
    """transformers' generate and one forward pass on the same prompts, as timed calls, and its tokenizer."""
    import torch
    import transformers

    folder, name = os.path.split(gguf)
    tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    def batch(ids_list):
        width = max(map(len, ids_list))
        ids = torch.full((len(ids_list), width), pad, dtype=torch.long)
        mask = torch.zeros((len(ids_list), width), dtype=torch.long)
        for i, ids_ in enumerate(ids_list):                     # left padding: every prompt ends at the edge
            ids[i, width - len(ids_):] = torch.tensor(ids_)
            mask[i, width - len(ids_):] = 1
        return ids, mask

    texts = [tok.apply_chat_template([dict(m) for m in r.messages], add_generation_prompt=True, tokenize=False)
             for r in requests]
    ids, mask = batch([tok(t, add_special_tokens=False).input_ids for t in texts])
    one = reader.one_ids[0]
    logit_ids, logit_mask = batch([reader.prompt_ids([dict(m) for m in r.messages]) + [one] for r in requests])

    def generate():
        torch.manual_seed(0)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=0.95,
                                 max_new_tokens=new_tokens, pad_token_id=pad)
        return out[:, ids.shape[1]:]

    def forward():
        with torch.no_grad():
            return model(input_ids=logit_ids, attention_mask=logit_mask).logits[:, -2:].float().numpy()
    return {"transformers generate": generate, "transformers score_logit": forward}, tok


def _transformers_figures(requests, timed: dict, tok, reader) -> dict:
    import numpy as np

    seconds, new = timed["transformers generate"]
    eos = set(tok.eos_token_id if isinstance(tok.eos_token_id, list) else [tok.eos_token_id])
    tokens = int(sum(next((j for j, t in enumerate(row.tolist()) if t in eos), len(row)) for row in new))
    out = {"generate": {"seconds": seconds, "verdicts_per_s": len(requests) / seconds, "completion_tokens": tokens,
                        "completion_tokens_per_s": tokens / seconds}}
    seconds, logits = timed["transformers score_logit"]   # [prompts, 2, vocab]: after the prefix, after "1"
    scores = []
    for row in logits:
        z = row - row.max(axis=-1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
        mass = np.array([p[0][reader.score_of == k].sum() for k in range(1, 11)])
        p_one = p[0][reader.one_ids].sum()
        mass[9] += p_one * p[1][reader.zero].sum()
        mass[0] += p_one * p[1][~reader.digit].sum()
        scores.append(int(np.argmax(mass)) + 1)
    out["score_logit"] = {"seconds": seconds, "verdicts_per_s": len(requests) / seconds, "scores": scores}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", help="GGUF file (default: the pinned SmolLM2-135M-Instruct)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-words", type=int, default=900, help="words of the response passage per prompt")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data-dir")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    from jaxwrite.common.pinned_models import fetch_pinned

    gguf = args.gguf or fetch_pinned("smollm2-135m-instruct")
    requests = _prompts(args.prompts, args.prompt_words, args.data_dir)
    ours_runs, reader = _jaxwrite_runs(gguf, requests, args.new_tokens)
    theirs_runs, tok = _transformers_runs(gguf, requests, args.new_tokens, reader)
    timed = _interleaved(ours_runs | theirs_runs, args.repeats)
    ours = _jaxwrite_figures(requests, timed)
    theirs = _transformers_figures(requests, timed, tok, reader)
    agree = sum(a == b for a, b in zip(ours["score_logit"]["scores"], theirs["score_logit"]["scores"]))
    result = {"model": os.path.basename(gguf), "prompts": len(requests), "new_tokens_cap": args.new_tokens,
              "prompt_tokens": ours["generate"]["prompt_tokens"], "jaxwrite": ours, "transformers": theirs,
              "score_logit_argmax_agreement": f"{agree}/{len(requests)}"}
    print("| mode | side | seconds | verdicts/s | completion tokens/s |")
    print("|---|---|---|---|---|")
    for mode in ("generate", "score_logit"):
        for side, r in (("jaxwrite", ours), ("transformers", theirs)):
            m = r[mode]
            rate = f"{m['completion_tokens_per_s']:.1f}" if "completion_tokens_per_s" in m else "-"
            print(f"| {mode} | {side} | {m['seconds']:.2f} | {m['verdicts_per_s']:.2f} | {rate} |")
    print(json.dumps({k: v for k, v in result.items() if k not in ("jaxwrite", "transformers")}))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
