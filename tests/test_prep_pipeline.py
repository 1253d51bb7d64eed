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
from jaxwrite.chat import ChatResult
from jaxwrite.prompts import official_prompt
from jaxwrite.prep import (Labelling, build_filtered_sft, generate_criteria, generate_responses, load_queries,
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
    summary = generate_criteria(queries, judge, tmp_path / "criteria.jsonl", Labelling(progress=False))
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
    assert main(["prep", "criteria", "--queries", str(queries), "--output", str(tmp_path / "criteria.jsonl"),
                 "--generator", chat_server, "--generator-model", "fake", "--generator-concurrency", "4",
                 "--no-progress"]) == 0
    # the protected query here is not a WritingBench query, so the real guard lets every query through
    assert main(["prep", "responses", "--criteria", str(tmp_path / "criteria.jsonl"), "--num-samples", "2",
                 "--output", str(tmp_path / "responses.jsonl"), "--data-dir", str(data_dir),
                 "--teacher", chat_server, "--teacher-model", "fake", "--teacher-concurrency", "4",
                 "--no-progress"]) == 0
    assert main(["prep", "critic-score", "--criteria", str(tmp_path / "criteria.jsonl"),
                 "--responses", str(tmp_path / "responses.jsonl"), "--output", str(tmp_path / "scores.jsonl"),
                 "--critic", chat_server, "--critic-model", "fake", "--critic-concurrency", "4",
                 "--no-progress"]) == 0
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


# --- judge errors by kind: permanent (4xx), transient (5xx), unparseable -----------------------------

CONTEXT_400 = "18036 tokens leave no room in the 4096-token context"


def failing_answer(body):
    """`answer`, except for markers: a teacher query or a critic-scored response holding "TOO-LONG" is
    answered 400, "DOWN" 503, and a response holding "GARBLED" gets a critic verdict that never parses."""
    messages = body["messages"]
    text = messages[-1]["content"]
    critic = messages[0]["content"] == CRITIC_SYSTEM
    if "TOO-LONG" in text:
        return 400, CONTEXT_400
    if "DOWN" in text:
        return 503, "overloaded"
    if critic and "GARBLED" in text:
        return "I cannot decide."
    return answer(messages, body.get("seed", 0))


def _quiet_client(url):
    from jaxwrite.chat import HttpChatModel
    client = HttpChatModel(url, "fake", max_retries=1)
    client._sleep = lambda seconds: None   # backoff without waiting
    return client


def _by_kind(err, desc):
    lines = [l for l in err.splitlines() if l.startswith(f"{desc}: ")]
    return {kind: next((l for l in lines if marker in l), None) for kind, marker in
            (("permanent", "permanent error"), ("transient", "transient error"), ("unparseable", "no parseable"))}


def test_prep_responses_and_critic_score_tell_error_kinds_apart(tmp_path, capsys):
    rows = [{"id": name, "query": f"Write essay {name} about rivers.", "domain2": "Essays"}
            for name in ("ok", "TOO-LONG", "DOWN")]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    criteria = tmp_path / "criteria.jsonl"
    generate_criteria(load_queries(tmp_path / "queries.jsonl"), FakeJudge(), criteria, Labelling(progress=False))
    calls = []
    with scripted_chat_server(lambda body: calls.append(body) or failing_answer(body)) as url:
        teacher = generate_responses(criteria, _quiet_client(url), tmp_path / "responses.jsonl", num_samples=1,
                                     guard=None, progress=False)
        assert teacher["written"] == 1 and teacher["failed_by_kind"] == {"permanent": 1, "transient": 1,
                                                                          "unparseable": 0}
        lines = _by_kind(capsys.readouterr().err, "responses")
        assert CONTEXT_400 in lines["permanent"] and "re-run" in lines["permanent"]
        assert "a re-run fails the same way" in lines["permanent"] and "re-run to retry" not in lines["permanent"]
        assert "HTTP 503: overloaded" in lines["transient"] and "re-run to retry them" in lines["transient"]
        # the teacher's 400 was asked once; its 503 twice (one client retry)
        assert sum("TOO-LONG" in c["messages"][-1]["content"] for c in calls) == 1
        assert sum("DOWN" in c["messages"][-1]["content"] for c in calls) == 2

        # Critic: one response of each kind, and one the critic scores.
        responses = tmp_path / "to_score.jsonl"
        texts = {"ok": "fine text quality=7", "TOO-LONG": "TOO-LONG", "DOWN": "DOWN", "GARBLED": "GARBLED"}
        responses.write_text("".join(json.dumps({"response_id": f"ok#{k}", "id": "ok", "sample": k,
                                                 "response": texts[name]}) + "\n"
                                     for k, name in enumerate(texts)))
        calls.clear()
        summary = score_responses(criteria, responses, _quiet_client(url), tmp_path / "scores.jsonl", attempts=3,
                                  progress=False)
    assert summary["scored"] == 1 and summary["failed"] == 3
    assert summary["failed_by_kind"] == {"permanent": 1, "transient": 1, "unparseable": 1}
    asked = lambda marker: sum(marker in c["messages"][-1]["content"] for c in calls)
    assert asked("TOO-LONG") == 5            # one per criterion: a 4xx is never asked again
    assert asked("DOWN") == 5 * 3 * 2        # every attempt, each with one client retry
    assert asked("GARBLED") == 5 * 3         # re-sampled up to the attempt limit
    lines = _by_kind(capsys.readouterr().err, "critic")
    assert f"1 response(s) failed with a permanent error, first: HTTP 400: {CONTEXT_400}" in lines["permanent"]
    assert "re-run to retry" not in lines["permanent"]
    assert "HTTP 503" in lines["transient"] and "re-run to retry them" in lines["transient"]
    assert "unparseable verdict" in lines["unparseable"] and "re-run to retry" not in lines["unparseable"]
    assert "may or may not" in lines["unparseable"]
    failures = [json.loads(l) for l in (tmp_path / "scores.failures.jsonl").read_text().splitlines()]
    kinds = {(f["response_id"], f["kind"], f["attempts"]) for f in failures}
    assert kinds == {("ok#1", "permanent", 1), ("ok#2", "transient", 3), ("ok#3", "unparseable", 3)}


def test_cli_critic_score_reports_a_permanent_error_with_the_servers_message(tmp_path, data_dir, capsys):
    rows = [{"id": "q", "query": "Write an essay about rivers.", "domain2": "Essays"}]
    (tmp_path / "queries.jsonl").write_text(json.dumps(rows[0]) + "\n")
    criteria = tmp_path / "criteria.jsonl"
    generate_criteria(load_queries(tmp_path / "queries.jsonl"), FakeJudge(), criteria, Labelling(progress=False))
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"response_id": "q#0", "id": "q", "sample": 0, "response": "TOO-LONG"}) + "\n")
    with scripted_chat_server(failing_answer) as url:
        assert main(["prep", "critic-score", "--criteria", str(criteria), "--responses", str(responses),
                     "--output", str(tmp_path / "scores.jsonl"), "--critic", url, "--critic-model", "fake",
                     "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["failed_by_kind"] == {"permanent": 1, "transient": 0, "unparseable": 0}
    [line] = [l for l in captured.err.splitlines() if "failed" in l]
    assert line.startswith(f"critic: 1 response(s) failed with a permanent error, first: HTTP 400: {CONTEXT_400}")
    assert "a re-run fails the same way" in line and "re-run to retry" not in line


def test_critic_score_sees_answers_by_the_one_extraction_rule(tmp_path):
    """`prep critic-score` judges what every scorer judges: a think/answer response's <answer> block; a
    malformed one is counted and not scored; `data critic-data` keeps the text the critic saw."""
    import data_pipelines as dp
    criteria = tmp_path / "criteria.jsonl"
    (tmp_path / "queries.jsonl").write_text(json.dumps({"id": "q", "query": "Write about rivers."}) + "\n")
    generate_criteria(load_queries(tmp_path / "queries.jsonl"), FakeJudge(), criteria, Labelling(progress=False))
    responses = tmp_path / "responses.jsonl"
    texts = ["<think>secret plan quality=1</think><answer>quality=7</answer>", "<think>only a plan</think>"]
    responses.write_text("".join(json.dumps({"response_id": f"q#{k}", "id": "q", "sample": k, "response": t}) + "\n"
                                 for k, t in enumerate(texts)))
    seen = []

    class Critic(FakeJudge):
        def chat(self, requests):
            seen.extend(r.messages[1]["content"] for r in requests)
            return super().chat(requests)

    summary = score_responses(criteria, responses, Critic(), tmp_path / "scores.jsonl", progress=False)
    assert summary["scored"] == 1 and summary["answer_extraction"]["applied"] == "think_answer"
    assert summary["answer_extraction"]["malformed"] == 1 and len(seen) == 5
    assert all("```quality=7```" in user and "secret plan" not in user for user in seen)
    [line] = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert line["response_id"] == "q#0" and line["score"] == 7
    verdicts = dp.verdicts_from_critic_scores(str(tmp_path / "scores.jsonl"), str(criteria), str(responses))
    assert {v["response"] for _, v in verdicts} == {"quality=7"}
