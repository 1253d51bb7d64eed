"""JSON-schema compile time and memory on issue 17's worst cases: the old compiler (git, before the
issue) beside the current one, and outlines-core's Rust index when it is importable (not a jaxwrite
dependency: `pip install outlines-core` or PYTHONPATH to a copy).

    python benchmarks/schema_compile.py [--vocab-size 4096] [--timeout-s 120]

The tokenizer is a SentencePiece model trained on the shared English corpus at --vocab-size (the tiny
recipes' size by default). Each (implementation, case) runs in its own process under --timeout-s, so
peak memory is that process's: `peak_mb` = peak RSS minus the RSS before compiling. outlines-core
gets the regex its own `build_regex_from_schema` makes (compact whitespace) and its Index over a
Vocabulary built from the same token bytes; it drops integer bounds, so its "4 integer ranges" row
is the unbounded integer, and its rows say nothing about correctness. The last line is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {
    "2,000-char const": {"type": "object", "properties": {"k": {"const": "x" * 2000}}},
    "200 boolean properties": {"type": "object", "properties": {f"p{i}": {"type": "boolean"} for i in range(200)}},
    "4 integer ranges 0..9999": {"type": "object", "properties": {f"r{i}": {"type": "integer", "minimum": 0,
                                                                          "maximum": 9999} for i in range(4)}},
    "verdict (score 1..10, reason)": {"type": "object", "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 10}, "reason": {"type": "string"}}},
    "string maxLength 200": {"type": "object", "properties": {"s": {"type": "string", "maxLength": 200}}},
}
# Six distinct ~200-byte schemas compiled one after another: what the process keeps.
SIX = [{"type": "object", "properties": {f"field_{i}_{j}": {"type": "integer", "minimum": 0, "maximum": 9999}
                                         for j in range(4)}} for i in range(6)]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _tokenizer(vocab: int) -> str:
    out = os.path.join(tempfile.gettempdir(), f"jaxwrite_schema_bench_sp{vocab}")
    if not os.path.isdir(out):
        from jaxwrite.text import train_sentencepiece
        corpus = os.path.join(os.path.dirname(HERE), "..", "shared", "data", "corpus_en")
        files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus))[:3]
        train_sentencepiece(files, out, vocab_size=vocab)
    return out


def _one(impl: str, case: str, tok_path: str) -> dict:
    from jaxwrite.text import load_tokenizer
    tok = load_tokenizer(tok_path)
    vocab, eos = tok.vocab_size, sorted(tok.eos_ids)
    schemas = SIX if case == "six 200-byte schemas, one process" else [CASES[case]]
    if impl == "old":
        sys.path.insert(0, HERE)
        from _legacy import legacy
        old = legacy(["json_schema_dfa", "token_constraint"])
        cset = old.token_constraint.ConstraintSet(tok, vocab, eos)
        cset.token_bytes()
        compile_one = cset.compile
        states = lambda tc: tc.next_state.shape[0]  # noqa: E731
    elif impl == "new":
        from jaxwrite.infer import ConstraintLimits, ConstraintSet
        limits = ConstraintLimits(cache_bytes=64 << 20) if len(schemas) > 1 else ConstraintLimits()
        cset = ConstraintSet(tok, vocab, eos, limits)
        cset.token_bytes()
        compile_one = cset.compile
        states = lambda tc: tc.next_state.shape[0]  # noqa: E731
    else:
        from outlines_core import Index, Vocabulary
        from outlines_core.json_schema import build_regex_from_schema
        table = tok.token_bytes()
        words: dict[bytes, list[int]] = {}
        for i, b in enumerate(table):
            if b and i not in eos:
                words.setdefault(b, []).append(i)
        vocabulary = Vocabulary(eos[0], words)
        compile_one = lambda s: Index(build_regex_from_schema(json.dumps(s), ""), vocabulary)  # noqa: E731
        states = lambda index: len(index.get_transitions())  # noqa: E731
    base = _rss_mb()
    start = time.perf_counter()
    try:
        results = [compile_one(s) for s in schemas]
        status, count = "ok", states(results[-1])
    except ValueError as err:
        status, count = f"refused: {str(err)[:90]}", None
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"seconds": round(seconds, 3), "peak_mb": round(peak - base, 1), "kept_mb": round(_rss_mb() - base, 1),
           "states": count, "status": status}
    if impl == "new":
        out["cache_mb"] = round(cset.cached_bytes / 2**20, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--timeout-s", type=float, default=120)
    parser.add_argument("--one", nargs=3, metavar=("IMPL", "CASE", "TOKENIZER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(*args.one)))
        return
    tok = _tokenizer(args.vocab_size)
    impls = ["old", "new"]
    try:
        import outlines_core  # noqa: F401
        impls.append("outlines-core")
    except ImportError:
        print("outlines-core not importable: its rows are skipped", file=sys.stderr)
    rows = []
    for case in [*CASES, "six 200-byte schemas, one process"]:
        for impl in impls:
            cmd = [sys.executable, os.path.abspath(__file__), "--one", impl, case, tok]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
                row = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else \
                    {"status": f"failed: {done.stderr.strip().splitlines()[-1][:120]}"}
            except subprocess.TimeoutExpired:
                row = {"status": f"killed after {args.timeout_s:g} s"}
            row = {"case": case, "impl": impl, **row}
            rows.append(row)
            print(f"{case:34s} {impl:14s} {row.get('seconds', '-')!s:>8} s  peak {row.get('peak_mb', '-')!s:>7} MB  "
                  f"kept {row.get('kept_mb', '-')!s:>7} MB  states {row.get('states', '-')!s:>6}  {row['status']}",
                  flush=True)
    print(json.dumps({"vocab_size": args.vocab_size, "rows": rows}))


if __name__ == "__main__":
    main()
