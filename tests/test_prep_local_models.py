"""Issue 8's evidence at test scale: criteria -> responses -> critic scores -> filter -> writer SFT through
the CLI with a tiny LOCAL model directory in every model role (benchmarks/prep_evidence.py, the same code
the by-hand evidence run uses). The random model's text is gibberish; what is checked is that every step
writes schema-valid files, counts every query, and keeps exactly the configured fraction per subdomain."""
import importlib.util
import json
import math

import pytest

from data_pipelines.chat_sft import read_writer_records
from jaxwrite.prep import keep_count, read_criteria, read_scores
from jaxwrite.prep.critic_scores import read_responses
from train_fixtures import REPO

_spec = importlib.util.spec_from_file_location("prep_evidence", REPO / "benchmarks" / "prep_evidence.py")
prep_evidence = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prep_evidence)


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.mark.slow
def test_local_model_chain_end_to_end(tmp_path, data_dir):
    fraction, samples, sft_steps = 0.4, 3, 3
    summary = prep_evidence.run_evidence(tmp_path, data_dir, ["Poetry", "Video Script"], [2, 2],
                                         num_samples=samples, fraction=fraction, rounding="ceil",
                                         teacher_tokens=16, sft_steps=sft_steps)
    # criteria: every query accepted or recorded as a failure with one reason per attempt
    crit = summary["criteria"]
    criteria = {str(r["id"]): r for _, r in read_criteria(tmp_path / "criteria.jsonl")}
    failures = (_lines(tmp_path / "criteria.failures.jsonl")
                if (tmp_path / "criteria.failures.jsonl").exists() else [])
    assert crit["written"] == len(criteria) > 0 and crit["failed"] == len(failures)
    assert crit["written"] + crit["failed"] == summary["queries"] == 4
    assert all(len(f["reasons"]) == 3 for f in failures)
    assert sum(crit["rejects"].values()) == sum(r["attempts"] - 1 for r in criteria.values()) + 3 * len(failures)
    # responses: N per accepted query, each valid against the criteria file
    responses = [r for _, r in read_responses(tmp_path / "responses.jsonl", {k: k for k in criteria})]
    assert len(responses) == samples * len(criteria) == summary["responses"]["written"]
    # critic: official parse on constrained verdicts; every scored line has five integer scores 1..10
    scores = read_scores(tmp_path / "scores.jsonl", {r["response_id"] for r in responses})
    assert summary["critic"]["scored"] == len(scores) and summary["critic"]["failed"] == len(responses) - len(scores)
    for rec in _lines(tmp_path / "scores.jsonl"):
        verdicts = [v[0]["score"] for v in rec["scores"].values()]
        assert len(verdicts) == 5 and all(isinstance(s, int) and 1 <= s <= 10 for s in verdicts)
        assert math.isclose(rec["score"], sum(verdicts) / 5)
    # filter: exactly ceil(0.4 * n) per subdomain, the top scores of each
    kept = [r for _, r in read_writer_records(str(tmp_path / "sft_data" / "kept.jsonl"))]
    every = [r for _, r in read_writer_records(str(tmp_path / "sft_data" / "all.jsonl"))]
    per_group = summary["filter"]["per_group"]
    for group, counts in per_group.items():
        group_all = sorted((r["score"] for r in every if r["domain2"] == group), reverse=True)
        group_kept = sorted((r["score"] for r in kept if r["domain2"] == group), reverse=True)
        assert counts["records"] == len(group_all) and counts["kept"] == keep_count(len(group_all), fraction, "ceil")
        assert group_kept == group_all[:counts["kept"]]
    assert len(every) == len(scores) and len(kept) == sum(c["kept"] for c in per_group.values())
    assert (tmp_path / "sft_data" / "report" / "report.html").exists()
    # writer SFT trained on the kept set (every kept record read; WritingBench queries allowed and counted)
    info = json.loads((tmp_path / "writer_sft" / "data_info.json").read_text())
    assert info["records"] == info["kept"] == len(kept) and info["guard"] == "allowed"
    metrics = [m for m in _lines(tmp_path / "writer_sft" / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in metrics] == list(range(1, sft_steps + 1))
    assert all(math.isfinite(m["loss"]) for m in metrics)
    assert (tmp_path / "writer_sft" / "checkpoints" / str(sft_steps)).is_dir()
