"""`jaxwrite data clean | pairs | critic-sft` end to end on small inputs."""
import json

from jaxwrite.cli import main


def test_clean_writes_documents_and_report(data_dir, tmp_path):
    out = tmp_path / "docs.jsonl"
    assert main(["data", "clean", "--input", str(data_dir / "corpus_en" / "pg11.txt"), "--output", str(out)]) == 0
    docs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    report = json.loads((tmp_path / "docs.jsonl.report.json").read_text())
    assert len(docs) == report["totals"]["documents"] >= 3 and docs[0]["id"] == "pg11/0"


def test_pairs_writes_splits_and_stats(full_data_dir, tmp_path, capsys):
    data_dir = full_data_dir   # figures of the full data sets
    assert main(["data", "pairs", "--data-dir", str(data_dir), "--output", str(tmp_path)]) == 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    # Capped by default (10 per prompt): every prompt has more, so each keeps exactly 10.
    assert stats["pairs_found"] == 20_287 and stats["pairs"] == 10 * stats["prompts"] == 2_040
    assert stats["capped"] == 20_287 - 2_040 and f"capped {stats['capped']} of 20287" in capsys.readouterr().out
    assert stats["pairs"] == stats["train"]["pairs"] + stats["eval"]["pairs"]
    assert 0.5 < stats["eval"]["length_baseline_accuracy"] < 1.0
    lines = (tmp_path / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == stats["eval"]["pairs"]
    per_prompt = {}
    for line in lines:
        qid = json.loads(line)["question_id"]
        per_prompt[qid] = per_prompt.get(qid, 0) + 1
    assert set(per_prompt.values()) == {10}
    assert sum(p.stat().st_size for p in tmp_path.glob("*.jsonl")) < 30e6   # was 226 MB uncapped


def test_pairs_uncapped_keeps_every_pair(full_data_dir, tmp_path):
    data_dir = full_data_dir   # figures of the full data sets
    assert main(["data", "pairs", "--data-dir", str(data_dir), "--output", str(tmp_path),
                 "--max-pairs-per-prompt", "0"]) == 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pairs"] == stats["pairs_found"] == 20_287 and stats["capped"] == 0


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
