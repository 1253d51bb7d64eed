"""`jaxwrite data clean | pairs | critic-sft` end to end on small inputs."""
import collections
import json

from data_pipelines import load_scored_responses, make_pairs
from data_pipelines.preferences import POOL_PATH
from jaxwrite.cli import main


def test_clean_writes_documents_and_report(data_dir, tmp_path):
    out = tmp_path / "docs.jsonl"
    assert main(["data", "clean", "--input", str(data_dir / "corpus_en" / "pg11.txt"), "--output", str(out)]) == 0
    docs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    report = json.loads((tmp_path / "docs.jsonl.report.json").read_text())
    assert len(docs) == report["totals"]["documents"] >= 3 and docs[0]["id"] == "pg11/0"


def _pairs_per_prompt(data_dir) -> collections.Counter:
    return collections.Counter(p.question_id for p in make_pairs(load_scored_responses(str(data_dir / POOL_PATH))))


def test_pairs_writes_splits_and_stats(data_dir, figure, tmp_path, capsys):
    assert main(["data", "pairs", "--data-dir", str(data_dir), "--output", str(tmp_path)]) == 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    # Capped by default (10 per prompt): each prompt keeps min(10, its pairs). Every prompt of the full pool
    # has more than 10, so each keeps exactly 10; three of the sample's twelve have 7.
    found = _pairs_per_prompt(data_dir)
    assert stats["pairs_found"] == sum(found.values()) == figure(20_287, 159)
    assert stats["pairs"] == sum(min(10, n) for n in found.values()) == figure(2_040, 111)
    out = capsys.readouterr().out
    assert stats["capped"] == stats["pairs_found"] - stats["pairs"]
    assert f"capped {stats['capped']} of {stats['pairs_found']}" in out
    assert stats["pairs"] == stats["train"]["pairs"] + stats["eval"]["pairs"]
    # Longer answers tend to win: on the full pool's 20 held-out prompts; the sample holds out one prompt,
    # too few to show a tendency, so there its 11 training prompts show it.
    assert 0.5 < stats[figure("eval", "train")]["length_baseline_accuracy"] < 1.0
    lines = (tmp_path / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == stats["eval"]["pairs"]
    per_prompt = {}
    for line in lines:
        qid = json.loads(line)["question_id"]
        per_prompt[qid] = per_prompt.get(qid, 0) + 1
    assert per_prompt == {q: min(10, found[q]) for q in per_prompt}
    assert sum(p.stat().st_size for p in tmp_path.glob("*.jsonl")) < 30e6   # was 226 MB uncapped


def test_pairs_uncapped_keeps_every_pair(data_dir, figure, tmp_path):
    assert main(["data", "pairs", "--data-dir", str(data_dir), "--output", str(tmp_path),
                 "--max-pairs-per-prompt", "0"]) == 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pairs"] == stats["pairs_found"] == figure(20_287, 159) and stats["capped"] == 0


def test_critic_sft_refuses_benchmark_query_then_drops(data_dir, tmp_path, capsys):
    with open(data_dir / "writingbench" / "benchmark_all.jsonl", encoding="utf-8") as f:
        bench = json.loads(f.readline())
    records = tmp_path / "records.jsonl"
    lines = [{"query": "Write a haiku about rain on a tin roof at night.", "response": "r",
              "criterion": bench["checklist"][0], "score": 8, "reason": "ok"},
             {"query": bench["query"], "response": "r", "criterion": bench["checklist"][1], "score": 3, "reason": "x"}]
    records.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    out = tmp_path / "sft.jsonl"
    args = ["data", "critic-sft", "--input", str(records), "--output", str(out), "--data-dir", str(data_dir)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "records.jsonl:2 field 'query': 1 record(s) overlap" in err and "re-run with --on-overlap drop" in err
    assert main(args + ["--on-overlap", "drop"]) == 0
    rendered = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rendered) == 1 and [m["role"] for m in rendered[0]["messages"]] == ["system", "user", "assistant"]
    assert json.loads(rendered[0]["messages"][2]["content"]) == {"score": 8, "reason": "ok"}
