"""End to end: `jaxwrite eval arena | refinebench | agreement` against a real OpenAI-compatible HTTP server
on 127.0.0.1 (scripted answers), through HttpJudge, writing raw jsonl, summary.json and reports."""
import json
import re

import pytest

from chat_server_support import scripted_chat_server
from jaxwrite.cli import main
from jaxwrite.evals.arena import PAIRWISE_SYSTEM
from jaxwrite.evals.refinebench_prompts import CHECKLIST_SYSTEM, PROMPT_LABEL


def _answer(messages):
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"]
    if system == PAIRWISE_SYSTEM:
        a = user.split("[Response A]\n")[1].split("\n[End of Response A]")[0]
        b = user.split("[Response B]\n")[1].split("\n[End of Response B]")[0]
        if "unparseable" in a + b:
            return "both are fine"
        return "[[A]]" if len(a) > len(b) else "[[B]]" if len(b) > len(a) else "[[C]]"
    if system == CHECKLIST_SYSTEM:
        n = len(re.findall(r"^\d+\. ", user.split("[Checklist]\n")[1], flags=re.M))
        improved = "revised" in user.split("[Response]\n")[1].split("[Checklist]")[0]
        return json.dumps({str(k): "Yes" if improved or k == 1 else "No" for k in range(1, n + 1)})
    turn = 1 + sum(m["role"] == "assistant" for m in messages)
    return "first answer" if turn == 1 else "revised answer"


@pytest.fixture(scope="module")
def server_url():
    with scripted_chat_server(lambda body: _answer(body["messages"])) as url:
        yield url


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_arena_cli(tmp_path, server_url, capsys):
    prompts = _write(tmp_path / "prompts.jsonl", [{"id": i, "prompt": f"write {i}"} for i in range(4)])
    short = _write(tmp_path / "short.jsonl", [{"id": i, "response": "s" * (1 + i % 2)} for i in range(4)])
    long = _write(tmp_path / "long.jsonl", [{"id": i, "response": "<think>x</think>\n\n" + "l" * 10}
                                            for i in range(4)])
    odd = _write(tmp_path / "odd.jsonl", [{"id": i, "response": "unparseable" if i == 0 else "mmmmm"}
                                          for i in range(4)])
    out = tmp_path / "arena"
    argv = ["eval", "arena", "--responses", short, long, f"mid={odd}", "--prompts", prompts,
            "--judge", server_url, "--judge-model", "fake", "--output", str(out), "--bootstrap", "50"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["elo"]["long"] > summary["elo"]["mid"] > summary["elo"]["short"]
    assert summary["n_invalid"] == 4 and summary["n_battles"] == 20  # prompt 0: mid's 4 verdicts fail
    assert summary["position_bias"]["consistency"] == 1.0
    assert (out / "elo.png").exists() and "Pairwise arena" in (out / "report.html").read_text()
    lines = (out / "verdicts.jsonl").read_text().splitlines()
    assert len(lines) == 24
    assert main(argv) == 0  # resumed: nothing new to judge
    assert len((out / "verdicts.jsonl").read_text().splitlines()) == 24
    bad = _write(tmp_path / "bad.jsonl", [{"id": 1, "response": "a"}, {"id": 1, "response": "b"}])
    assert main(["eval", "arena", "--responses", short, bad, "--prompts", prompts, "--judge", server_url,
                 "--judge-model", "fake", "--output", str(tmp_path / "x")]) == 2
    assert "bad.jsonl:2 field 'id': duplicate prompt id" in capsys.readouterr().err


def test_refinebench_cli(tmp_path, server_url, data_dir):
    out = tmp_path / "rb"
    argv = ["eval", "refinebench", "--model", server_url, "--model-name", "m", "--judge", server_url,
            "--judge-model", "j", "--mode", "guided", "--turns", "3", "--output", str(out),
            "--data-dir", str(data_dir), "--limit", "3"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_problems"] == 3 and summary["overall"]["pass"] == [0.0, 100.0, 100.0]
    assert summary["stop_reasons"] == {"all_satisfied": 3}
    assert len((out / "turns.jsonl").read_text().splitlines()) == 6
    assert (out / "curves.png").exists()
    md = (out / "report.md").read_text()
    assert "official prompts unavailable" in md
    judging = summary["judging"]  # the checklist judge, named with its mode, in summary.json and report.md
    assert (judging["judge"], judging["mode"], judging["official"]) == (f"http:j@{server_url}/chat/completions",
                                                                        "generate", True)
    assert judging["prompt"] == PROMPT_LABEL and judging["failed"] == 0
    assert f"- Judge: {judging['judge']} (transport: http)" in md and "- Mode: generate (official" in md


def test_agreement_cli(tmp_path, server_url, data_dir):
    out = tmp_path / "agree"
    argv = ["eval", "agreement", "--judge", server_url, "--judge-model", "j", "--output", str(out),
            "--data-dir", str(data_dir), "--max-pairs", "6", "--bootstrap", "20"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_pairs"] == 6 and sum(summary["human_labels"].values()) == 6
    assert summary["judge_vs_human"]["n"] + summary["judge_vs_human"]["n_unlabelled"] == 6
    assert len((out / "verdicts.jsonl").read_text().splitlines()) == 12  # both orders
    md = (out / "report.md").read_text()
    assert "Cohen's kappa" in md
    judging = summary["judging"]
    assert judging["judge"].startswith("http:j@") and judging["mode"] == "generate" and judging["official"]
    # judgements without a verdict are counted with their reason, beside the unlabelled pairs
    assert (judging["failed"] > 0) == (summary["judge_vs_human"]["n_unlabelled"] > 0)
    assert f"- Judge: {judging['judge']}" in md and "- Failed items (not scored):" in md
