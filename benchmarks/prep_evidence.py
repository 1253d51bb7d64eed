"""Evidence run of issue 8 with tiny LOCAL models: criteria -> teacher responses -> critic scores ->
per-subdomain filter -> writer SFT, every model step through `jaxwrite prep ... --generator/--teacher/
--critic DIR` (the in-process engine, no HTTP), then `jaxwrite train` on the kept set.

The model is a random-init tiny Transformer with a small SentencePiece tokenizer trained here on the
text the steps send (the official WritingBench critic prompts, jaxwrite's criteria prompt, the chosen
queries and WritingBench checklists as JSON), so the 2,700-token critic prompts of a byte-level
tokenizer shrink to about 1,000 and the run fits a CPU. Quality is not the point: the random model
writes gibberish, but it writes it through the real prompts, schema-constrained decoding, validation,
the official critic parse and the exact per-subdomain filter. One model plays generator, teacher and
critic (three roles, one directory); the report says so.

The queries are WritingBench's own (shortest English ones of the chosen subdomains), so the responses
step runs with --allow-overlap and the SFT with data.allow_overlap=True, both counted in the summaries:
the resulting writer must never be evaluated on WritingBench.

  python benchmarks/prep_evidence.py --workdir /tmp/prep_evidence \\
      --subdomains Poetry "Video Script" "Film/TV Review" --queries-per-subdomain 4 --num-samples 3
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time
from typing import Any, Sequence

REPO = pathlib.Path(__file__).resolve().parents[1]


def pick_queries(benchmark: pathlib.Path, subdomains: Sequence[str], per_subdomain: Sequence[int],
                 lang: str = "en") -> list[dict[str, Any]]:
    """The shortest `per_subdomain[i]` queries of each subdomain (WritingBench records, in `lang`)."""
    records = [json.loads(line) for line in benchmark.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = []
    for name, count in zip(subdomains, per_subdomain):
        pool = sorted((r for r in records if r["domain2"] == name and r["lang"] == lang),
                      key=lambda r: (len(r["query"]), r["index"]))
        if len(pool) < count:
            raise ValueError(f"subdomain {name!r}: {len(pool)} {lang} queries, {count} wanted")
        chosen += [{"id": r["index"], "query": r["query"], "domain1": r["domain1"], "domain2": r["domain2"],
                    "lang": r["lang"]} for r in pool[:count]]
    return chosen


def tokenizer_corpus(data_dir: pathlib.Path, queries: Sequence[dict[str, Any]], out: pathlib.Path,
                     checklists: int = 200) -> pathlib.Path:
    """Text the tiny model will be prompted with: the official critic prompts, the criteria prompt of each
    query, and `checklists` WritingBench checklists as JSON (so quotes and keys get their own pieces)."""
    from jaxwrite.prep import criteria_messages
    from jaxwrite.prompts import CRITIC_SYSTEM, CRITIC_USER, official_prompt
    parts = [official_prompt(CRITIC_SYSTEM), official_prompt(CRITIC_USER)]
    for q in queries:
        parts += [m["content"] for m in criteria_messages(q["query"], q["domain1"], q["domain2"])]
    with open(data_dir / "writingbench" / "benchmark_all.jsonl", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    parts += [json.dumps(r["checklist"], ensure_ascii=False) for r in records if r["lang"] == "en"][:checklists]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return out


def tiny_model_dir(out: pathlib.Path, corpus: pathlib.Path, *, vocab_size: int = 512, max_seq_len: int = 2048,
                   num_layers: int = 1, seed: int = 0) -> pathlib.Path:
    """A jaxwrite model directory: random-init tiny Transformer + SentencePiece trained on `corpus`."""
    from flax import nnx

    from jaxwrite.checkpoint import save_model_dir
    from jaxwrite.models import Transformer, get_preset
    from jaxwrite.text import train_sentencepiece
    tokenizer = train_sentencepiece([str(corpus)], str(out.parent / "tokenizer"), vocab_size)
    cfg = get_preset("tiny", vocab_size=tokenizer.vocab_size, max_seq_len=max_seq_len, num_layers=num_layers)
    return pathlib.Path(save_model_dir(out, Transformer(cfg, nnx.Rngs(seed)), cfg,
                                       tokenizer_dir=str(out.parent / "tokenizer")))


def _cli(args: list[str]) -> None:
    from jaxwrite.cli import main
    status = main(args)
    if status != 0:
        raise RuntimeError(f"jaxwrite {' '.join(args[:2])} exited with status {status}")


def _read_json(path: pathlib.Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def run_evidence(workdir: pathlib.Path, data_dir: pathlib.Path, subdomains: Sequence[str],
                 per_subdomain: Sequence[int], *, num_samples: int = 2, fraction: float = 0.5,
                 rounding: str = "floor", teacher_tokens: int = 32, criteria_attempts: int = 3,
                 reask: str = "fresh", sft_steps: int = 4, max_seq_len: int = 4096,
                 progress: bool = False) -> dict[str, Any]:
    """Runs the whole chain in `workdir` (resumable: each step skips what is done); returns the summary
    with each step's own summary and the wall time of each step."""
    workdir.mkdir(parents=True, exist_ok=True)
    queries = pick_queries(data_dir / "writingbench" / "benchmark_all.jsonl", subdomains, per_subdomain)
    (workdir / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries),
                                           encoding="utf-8")
    times: dict[str, float] = {}
    start = time.perf_counter()
    model = workdir / "model"
    if not (model / "model_config.json").exists():
        corpus = tokenizer_corpus(data_dir, queries, workdir / "tokenizer_corpus.txt")
        tiny_model_dir(model, corpus, max_seq_len=max_seq_len)
    times["model"] = time.perf_counter() - start
    quiet = [] if progress else ["--no-progress"]
    local = lambda role: [f"--{role}-concurrency", "32", *quiet]   # records per batch = the engine's rows
    steps = {
        "criteria": ["prep", "criteria", "--queries", str(workdir / "queries.jsonl"),
                     "--output", str(workdir / "criteria.jsonl"), "--generator", str(model),
                     "--constrain-json", "--temperature", "1.0", "--top-p", "1.0", "--attempts",
                     str(criteria_attempts), "--reask", reask, "--summary", str(workdir / "criteria.summary.json"),
                     *local("generator")],
        "responses": ["prep", "responses", "--criteria", str(workdir / "criteria.jsonl"),
                      "--output", str(workdir / "responses.jsonl"), "--num-samples", str(num_samples),
                      "--teacher", str(model), "--max-tokens", str(teacher_tokens), "--data-dir", str(data_dir),
                      "--allow-overlap", "--summary", str(workdir / "responses.summary.json"),
                      *local("teacher")],
        "critic": ["prep", "critic-score", "--criteria", str(workdir / "criteria.jsonl"),
                   "--responses", str(workdir / "responses.jsonl"), "--output", str(workdir / "scores.jsonl"),
                   "--critic", str(model), "--constrain-json", "--summary", str(workdir / "critic.summary.json"),
                   *local("critic")],
        "filter": ["prep", "filter", "--criteria", str(workdir / "criteria.jsonl"),
                   "--responses", str(workdir / "responses.jsonl"), "--scores", str(workdir / "scores.jsonl"),
                   "--output-dir", str(workdir / "sft_data"), "--fraction", str(fraction), "--rounding", rounding],
        "writer_sft": ["train", "--config", str(REPO / "configs" / "writer_sft_tiny.py"),
                       "--workdir", str(workdir / "writer_sft"),
                       f"--config.data.train_path={workdir / 'sft_data' / 'kept.jsonl'}",
                       f"--config.data_dir={data_dir}", f"--config.tokenizer.path={model / 'tokenizer'}",
                       f"--config.model.init_from={model}", "--config.model.num_layers=1",
                       f"--config.num_steps={sft_steps}", "--config.log_every=1", "--config.eval_every=0",
                       f"--config.checkpoint_every={sft_steps}", "--config.data.seq_len=256",
                       "--config.data.batch_size=8", "--config.data.allow_overlap=True",
                       f"--config.progress_bar={progress}", "--config.peak_flops_per_device=1e12"],
    }
    for name, args in steps.items():
        begin = time.perf_counter()
        _cli(args)
        times[name] = time.perf_counter() - begin
    summary = {"queries": len(queries), "subdomains": list(subdomains), "model": str(model),
               "criteria": _read_json(workdir / "criteria.summary.json"),
               "responses": _read_json(workdir / "responses.summary.json"),
               "critic": _read_json(workdir / "critic.summary.json"),
               "filter": _read_json(workdir / "sft_data" / "report" / "summary.json"),
               "seconds": {k: round(v, 1) for k, v in times.items()},
               "total_seconds": round(time.perf_counter() - start, 1)}
    (workdir / "evidence.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1) + "\n",
                                           encoding="utf-8")
    return summary


def main() -> None:
    from jaxwrite.common import find_data_dir
    from jaxwrite.common.data_dir import DATA_DIR_HELP
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", required=True, type=pathlib.Path)
    p.add_argument("--data-dir", help="data root holding writingbench/ " + DATA_DIR_HELP)
    p.add_argument("--subdomains", nargs="+", default=["Poetry", "Video Script", "Film/TV Review"])
    p.add_argument("--queries-per-subdomain", nargs="+", type=int, default=[4],
                   help="one count for all subdomains, or one per subdomain")
    p.add_argument("--num-samples", type=int, default=3)
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--rounding", default="floor")
    p.add_argument("--teacher-tokens", type=int, default=32)
    p.add_argument("--reask", choices=("same", "fresh"), default="fresh")
    p.add_argument("--sft-steps", type=int, default=10)
    args = p.parse_args()
    counts = args.queries_per_subdomain * (len(args.subdomains) if len(args.queries_per_subdomain) == 1 else 1)
    data_dir = find_data_dir(args.data_dir, ("writingbench",))
    summary = run_evidence(args.workdir, data_dir, args.subdomains, counts, num_samples=args.num_samples,
                           fraction=args.fraction, rounding=args.rounding, teacher_tokens=args.teacher_tokens,
                           reask=args.reask, sft_steps=args.sft_steps, progress=True)
    print(json.dumps(summary, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
