"""End to end: criteria -> teacher responses -> critic scores -> per-subdomain filter, with a fake judge
in process and once through a real OpenAI-compatible HTTP server on 127.0.0.1 and the CLI."""
import json
import re

import pytest

from chat_server_support import scripted_chat_server
from data_pipelines import ContaminationGuard
from data_pipelines.chat_sft import read_writer_records
from jaxwrite.cli import main
from jaxwrite.common import InputError
from jaxwrite.evals import ChatResult, official_prompt
from jaxwrite.prep import (build_filtered_sft, generate_criteria, generate_responses, load_queries,
                           score_responses)

CRITIC_SYSTEM = official_prompt("writingbench_critic_system")
PROTECTED = "Please draft the annual shareholder letter for a mid-sized logistics company covering growth"


def answer(messages, seed):
    """What every model in these tests says: criteria, teacher text 'quality=K', critic verdicts."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else None
    if system == CRITIC_SYSTEM:
        quality = int(re.search(r"quality=(\d+)", messages[1]["content"]).group(1))
        return json.dumps({"score": quality, "reason": "as stated"})
    if system is not None and system.startswith("You design evaluation rubrics"):
        return json.dumps([{"name": f"C{i}", "criteria_description": "d", "1-2": "a", "3-4": "b", "5-6": "c",
                            "7-8": "d", "9-10": "e"} for i in range(5)])
    return f"Here is my text. quality={1 + seed % 10}"


class FakeJudge:
    label = "fake:all-roles"

    def chat(self, requests):
        return [ChatResult(text=answer(list(r.messages), r.sampling.seed or 0), finish_reason="stop") for r in requests]


def _write_queries(path):
    rows = [{"id": f"e{i}", "query": f"Write essay number {i} about rivers.", "domain1": "Lit",
             "domain2": "Essays", "lang": "en"} for i in range(3)]
    rows += [{"id": f"l{i}", "query": f"写第{i}封感谢信。", "domain1": "Biz", "domain2": "Letters", "lang": "zh"}
             for i in range(2)]
    rows.append({"id": "leak", "query": PROTECTED, "domain1": "Biz", "domain2": "Letters", "lang": "en"})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_end_to_end_with_a_fake_judge(tmp_path):
    judge = FakeJudge()
    queries = load_queries(_write_queries(tmp_path / "queries.jsonl"))
    summary = generate_criteria(queries, judge, tmp_path / "criteria.jsonl", progress=False)
    assert summary["written"] == 6 and summary["rejects"] == {}
    guard = ContaminationGuard([PROTECTED])
    with pytest.raises(InputError, match="overlap protected benchmark queries"):
        generate_responses(tmp_path / "criteria.jsonl", judge, tmp_path / "responses.jsonl", num_samples=4,
                           guard=guard, progress=False)
    summary = generate_responses(tmp_path / "criteria.jsonl", judge, tmp_path / "responses.jsonl", num_samples=4,
                                 guard=guard, on_overlap="drop", progress=False)
    assert summary["guard"]["dropped"] == 1 and summary["written"] == 20
    summary = score_responses(tmp_path / "criteria.jsonl", tmp_path / "responses.jsonl", judge,
                              tmp_path / "scores.jsonl", progress=False)
    assert summary["scored"] == 20 and summary["failed"] == 0
    # resuming any step repeats nothing
    assert generate_responses(tmp_path / "criteria.jsonl", judge, tmp_path / "responses.jsonl", num_samples=4,
                              guard=guard, on_overlap="drop", progress=False)["written"] == 0
    assert score_responses(tmp_path / "criteria.jsonl", tmp_path / "responses.jsonl", judge,
                           tmp_path / "scores.jsonl", progress=False)["resumed"] == 20
    summary = build_filtered_sft(tmp_path / "criteria.jsonl", tmp_path / "responses.jsonl", tmp_path / "scores.jsonl",
                                 tmp_path / "sft")
    assert summary["per_group"]["Essays"]["records"] == 12 and summary["per_group"]["Essays"]["kept"] == 6
    assert summary["per_group"]["Letters"]["records"] == 8 and summary["per_group"]["Letters"]["kept"] == 4
    kept = [r for _, r in read_writer_records(str(tmp_path / "sft" / "kept.jsonl"))]
    all_ = [r for _, r in read_writer_records(str(tmp_path / "sft" / "all.jsonl"))]
    for group in ("Essays", "Letters"):
        scores = sorted((r["score"] for r in all_ if r["domain2"] == group), reverse=True)
        kept_scores = sorted((r["score"] for r in kept if r["domain2"] == group), reverse=True)
        assert kept_scores == scores[:len(scores) // 2]
    assert all(re.search(r"quality=(\d+)", r["response"]).group(1) == str(int(r["score"])) for r in kept)


@pytest.fixture
def chat_server():
    with scripted_chat_server(lambda body: answer(body["messages"], body.get("seed", 0))) as url:
        yield url


def test_cli_pipeline_over_http(tmp_path, chat_server, data_dir, capsys):
    queries = _write_queries(tmp_path / "queries.jsonl")
    model = ["--concurrency", "4", "--no-progress"]
    assert main(["prep", "criteria", "--queries", str(queries), "--output", str(tmp_path / "criteria.jsonl"),
                 "--generator", chat_server, "--generator-model", "fake", *model]) == 0
    # the protected query here is not a WritingBench query, so the real guard lets every query through
    assert main(["prep", "responses", "--criteria", str(tmp_path / "criteria.jsonl"), "--num-samples", "2",
                 "--output", str(tmp_path / "responses.jsonl"), "--data-dir", str(data_dir),
                 "--teacher", chat_server, "--teacher-model", "fake", *model]) == 0
    assert main(["prep", "critic-score", "--criteria", str(tmp_path / "criteria.jsonl"),
                 "--responses", str(tmp_path / "responses.jsonl"), "--output", str(tmp_path / "scores.jsonl"),
                 "--critic", chat_server, "--critic-model", "fake", *model]) == 0
    capsys.readouterr()
    assert main(["prep", "filter", "--criteria", str(tmp_path / "criteria.jsonl"),
                 "--responses", str(tmp_path / "responses.jsonl"), "--scores", str(tmp_path / "scores.jsonl"),
                 "--output-dir", str(tmp_path / "sft")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["records"], summary["kept"], summary["unscored"]) == (12, 6, 0)
    assert (tmp_path / "sft" / "report" / "report.html").exists()
    # a bad input file is one clear line and status 2
    assert main(["prep", "filter", "--criteria", str(queries), "--responses", str(tmp_path / "responses.jsonl"),
                 "--scores", str(tmp_path / "scores.jsonl"), "--output-dir", str(tmp_path / "x")]) == 2
    assert "queries.jsonl:1 field 'checklist'" in capsys.readouterr().err


def test_data_criteria_entry_point(tmp_path, chat_server, capsys):
    # The contract: `jaxwrite data criteria --queries Q.jsonl --generator MODEL_OR_URL`.
    queries = _write_queries(tmp_path / "queries.jsonl")
    assert main(["data", "criteria", "--queries", str(queries), "--output", str(tmp_path / "c.jsonl"),
                 "--generator", chat_server, "--generator-model", "fake", "--no-progress"]) == 0
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 6
    assert main(["data", "criteria", "--queries", str(queries), "--output", str(tmp_path / "d.jsonl"),
                 "--generator", chat_server]) == 2
    assert "expected --generator-model NAME" in capsys.readouterr().err
