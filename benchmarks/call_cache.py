"""`jaxwrite eval writingbench score` on the embedded sample with a cold and a warm judge-call cache
(issue 27 §1): wall time of the whole command, calls asked, and whether the score files are identical.

Judge: SmolLM2-135M-Instruct (Q4_1 GGUF, the suite's pinned real model; `--gguf` takes another file) in
process, in `--judge-mode` (default score_logit: one prefill per verdict, so a 2-core machine can run the
sample; generate mode samples each verdict with the official 2,048-token budget). Queries: `--indices` of the
embedded sample (`--data-dir sample`), five criteria each; responses: public-domain passages from the shared
English corpus, `--response-words` long.

Each round runs, each in a fresh process (the `jaxwrite` CLI as a user runs it, imports, model load and
compile included):

* cold: a new cache file, every verdict asked of the judge;
* warm: the same command with the same cache file and a new output file, every verdict a cache hit.

Rounds alternate cold and warm, so the shared machine's load falls on both alike (median of `--repeats`).

    python benchmarks/call_cache.py [--indices 4 5 102 194] [--repeats 2] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _responses(path: str, indices: list[int], words: int) -> None:
    from jaxwrite.common.data_dir import benchmark_dir

    corpus = (benchmark_dir(None, "corpus_en") / "pg1342.txt").read_text(encoding="utf-8").split()
    with open(path, "w", encoding="utf-8") as f:
        for n, index in enumerate(indices):
            start = 3000 + 2000 * n
            f.write(json.dumps({"index": index, "response": " ".join(corpus[start:start + words])}) + "\n")


def _score(gguf: str, mode: str, responses: str, output: str, cache: str, indices: list[int]) -> dict:
    cmd = ["jaxwrite", "eval", "writingbench", "score", "--responses", responses, "--judge", gguf,
           "--judge-mode", mode, "--data-dir", "sample", "--indices", *map(str, indices), "--output", output,
           "--cache", cache]
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    usage = json.loads(done.stdout)["judging"]["usage"]["judge"]
    return {"seconds": seconds, "requests": usage["requests"], "cache_hits": usage["cache_hits"],
            "cache_misses": usage["cache_misses"], "prompt_tokens": usage["prompt_tokens"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", help="GGUF judge (default: the pinned SmolLM2-135M-Instruct)")
    parser.add_argument("--judge-mode", default="score_logit", choices=("generate", "score_logit"))
    parser.add_argument("--indices", type=int, nargs="+", default=[4, 5, 102, 194])
    parser.add_argument("--response-words", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    from jaxwrite.common.pinned_models import fetch_pinned

    gguf = args.gguf or fetch_pinned("smollm2-135m-instruct")
    runs = {"cold": [], "warm": []}
    identical = True
    with tempfile.TemporaryDirectory() as tmp:
        responses = os.path.join(tmp, "responses.jsonl")
        _responses(responses, args.indices, args.response_words)
        for r in range(args.repeats):
            cache = os.path.join(tmp, f"calls{r}.sqlite")
            outputs = [os.path.join(tmp, f"{kind}{r}.jsonl") for kind in ("cold", "warm")]
            for kind, output in zip(("cold", "warm"), outputs):
                runs[kind].append(_score(gguf, args.judge_mode, responses, output, cache, args.indices))
                print(kind, runs[kind][-1], file=sys.stderr, flush=True)
            with open(outputs[0], "rb") as a, open(outputs[1], "rb") as b:
                identical &= a.read() == b.read()
    verdicts = 5 * len(args.indices)
    result = {"model": os.path.basename(gguf), "judge_mode": args.judge_mode, "indices": args.indices,
              "verdicts": verdicts, "identical_score_files": identical, "runs": runs,
              **{f"{kind}_median_s": statistics.median(r["seconds"] for r in rs) for kind, rs in runs.items()}}
    print("| cache | wall s (median) | verdicts asked | cache hits |")
    print("|---|---|---|---|")
    for kind, rs in runs.items():
        print(f"| {kind} | {result[f'{kind}_median_s']:.1f} | {rs[-1]['cache_misses']} | {rs[-1]['cache_hits']} |")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
