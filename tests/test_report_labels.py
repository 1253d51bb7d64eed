"""Every report names who judged and how: judge, mode (official or not), prompt version, think/answer
handling, failed items and why; summary files are strict JSON (never a bare NaN). Judges are real HTTP
servers on 127.0.0.1."""
import json

from chat_server_support import scripted_chat_server
from jaxwrite.cli import main
from jaxwrite.evals.arena import Battle, rate_arena
from jaxwrite.evals.judging import judge_block, judge_from_label, judging_markdown
from jaxwrite.evals.report import write_report
from jaxwrite.evals.report_json import write_json
from test_evals_judge_http import OpenAIStub

LBW_VERDICT = ('```json\n{"Analysis": "ok", "Relevance": 5, "Accuracy": 4, "Coherence": 4, "Clarity": 4, '
               '"Breadth and Depth": 3, "Reading Experience": 4}\n```')


def _strict_json(path):
    """The file as JSON, failing on NaN / Infinity (which Python's json would otherwise accept)."""
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def _write_lines(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _assert_names_judge(summary, md, label_start, mode="generate", official=True):
    judging = summary["judging"]
    assert judging["judge"].startswith(label_start) and judging["mode"] == mode
    assert judging["official"] is official
    assert f"- Judge: {judging['judge']}" in md
    assert f"- Mode: {mode} ({'official' if official else 'NON-OFFICIAL'} judging mode)" in md


def test_write_json_maps_non_finite_to_null_and_says_where(tmp_path):
    found = write_json(tmp_path / "s.json", {"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": 2.0}})
    assert found == ["a", "b[1]"]
    assert _strict_json(tmp_path / "s.json") == {"a": None, "b": [1.0, None], "c": {"d": 2.0},
                                                  "non_finite_as_null": ["a", "b[1]"]}
    paths = write_report(tmp_path / "r", "t", {"kappa": float("nan")}, [])
    assert _strict_json(paths["summary"])["kappa"] is None


def test_judge_block_from_a_label_marks_score_logit_non_official():
    block = judge_block(judge_from_label("local[score_logit (non-official)]:critic"), "p1",
                        {"mode": "auto", "applied": "think_answer", "rule": "answer only", "malformed": 2},
                        {"unparseable verdict": 1})["judging"]
    assert (block["transport"], block["mode"], block["official"], block["inferred"]) == (
        "local", "score_logit", False, True)
    assert block["failed"] == 3  # one judge failure + two malformed responses
    md = judging_markdown(block)
    assert "- Mode: score_logit (NON-OFFICIAL judging mode)" in md and "inferred from the judge label" in md
    assert "- Think/answer handling: auto -> think_answer: answer only" in md
    assert "unparseable verdict: 1" in md and "malformed think/answer response" in md
    none = judging_markdown(judge_block(None, None, None, {}, no_judge="no judge: S_q not computed")["judging"])
    assert none.startswith("- Judge: none (no judge: S_q not computed)")


def test_longbench_write_report_differs_with_and_without_judge(tmp_path, data_dir):
    responses = _write_lines(tmp_path / "r.jsonl", [{"index": 1, "response": "Christmas cactus " * 50},
                                                    {"index": 2, "response": "BAD " * 20}])
    base = ["eval", "longbench-write", "score", "--responses", responses, "--data-dir", str(data_dir)]
    assert main(base + ["--output", str(tmp_path / "plain")]) == 0
    with OpenAIStub(answer=lambda content: "nope" if "BAD BAD" in content else LBW_VERDICT) as server:
        assert main(base + ["--output", str(tmp_path / "judged"), "--judge", server.url,
                            "--judge-model", "lbw-judge"]) == 0
    plain, judged = tmp_path / "plain", tmp_path / "judged"
    for name in ("report.md", "report.html", "summary.json"):
        assert (plain / name).read_bytes() != (judged / name).read_bytes(), name

    summary, md = _strict_json(plain / "summary.json"), (plain / "report.md").read_text()
    assert summary["judging"]["judge"] is None and summary["judging"]["note"].startswith("no judge: S_q not computed")
    assert "- Judge: none (no judge: S_q not computed" in md
    assert "no judge: S_q not computed" in (plain / "report.html").read_text()

    summary, md = _strict_json(judged / "summary.json"), (judged / "report.md").read_text()
    _assert_names_judge(summary, md, "http:lbw-judge@")
    judging = summary["judging"]
    assert judging["settings"]["temperature"] == 0.5 and judging["settings"]["attempts"] == 5
    assert judging["prompt"].startswith("official longbench_write_judge (github.com/THUDM/LongWriter@")
    assert judging["answer_extraction"]["applied"] == "official_strip"
    assert judging["failed"] == 1 and list(judging["failure_reasons"]) == ["unparseable verdict (after 5 tries)"]
    assert "- Failed items (not scored): 1 [unparseable verdict (after 5 tries): 1]" in md
    assert "<h2>Judging</h2>" in (judged / "report.html").read_text()


def test_writingbench_score_report_and_aggregate_name_the_judge(tmp_path, data_dir):
    responses = _write_lines(tmp_path / "r.jsonl", [{"index": 10, "response": "An answer."},
                                                    {"index": 11, "response": "BAD ANSWER"}])
    scores = tmp_path / "s.jsonl"
    verdict = '```json\n{"score": 8, "reason": "because"}\n```'
    with OpenAIStub(answer=lambda content: "no json" if "BAD ANSWER" in content else verdict) as server:
        assert main(["eval", "writingbench", "score", "--responses", responses, "--judge", server.url,
                     "--judge-model", "critic", "--output", str(scores), "--data-dir", str(data_dir),
                     "--indices", "10", "11", "--report-dir", str(tmp_path / "live")]) == 1   # 11 failed
    assert main(["eval", "writingbench", "report", "--scores", str(scores), "--data-dir", str(data_dir),
                 "--output", str(tmp_path / "from_file")]) == 0
    assert main(["eval", "writingbench", "aggregate", "--scores", str(scores), "--data-dir", str(data_dir),
                 "--output", str(tmp_path / "agg.json")]) == 0

    for report in ("live", "from_file"):
        summary = _strict_json(tmp_path / report / "summary.json")
        md = (tmp_path / report / "report.md").read_text()
        _assert_names_judge(summary, md, "http:critic@")
        judging = summary["judging"]
        assert judging["prompt"].startswith("official writingbench_critic_system + writingbench_critic_user")
        assert judging["settings"]["temperature"] == 1.0 and judging["settings"]["attempts"] == 15
        assert judging["failed"] == 1 and judging["failure_reasons"] == {"unparseable verdict (after 15 tries)": 1}
        assert "- Think/answer handling: auto -> official_strip" in md
    assert _strict_json(tmp_path / "agg.json")["judging"] == judging

    # a meta file from before judges described themselves: the label still tells judge and mode
    meta_path = tmp_path / "s.jsonl.meta.json"
    meta = json.loads(meta_path.read_text())
    meta.pop("judge_info")
    meta_path.write_text(json.dumps(meta))
    assert main(["eval", "writingbench", "report", "--scores", str(scores), "--data-dir", str(data_dir),
                 "--output", str(tmp_path / "old")]) == 0
    summary = _strict_json(tmp_path / "old" / "summary.json")
    _assert_names_judge(summary, (tmp_path / "old" / "report.md").read_text(), "http:critic@")
    assert summary["judging"]["inferred"] is True


def test_arena_with_no_valid_verdict_says_so_in_valid_json(tmp_path, capsys):
    prompts = _write_lines(tmp_path / "p.jsonl", [{"id": i, "prompt": f"write {i}"} for i in range(2)])
    one = _write_lines(tmp_path / "one.jsonl", [{"id": i, "response": "short"} for i in range(2)])
    two = _write_lines(tmp_path / "two.jsonl", [{"id": i, "response": "longer one"} for i in range(2)])
    out = tmp_path / "arena"
    with scripted_chat_server(lambda body: "Both have merits; I cannot decide.") as url:
        rc = main(["eval", "arena", "--responses", one, two, "--prompts", prompts, "--judge", url,
                   "--judge-model", "undecided", "--output", str(out), "--bootstrap", "20"])
    captured = capsys.readouterr()
    assert rc == 0 and json.loads(captured.out)["status"] == "no valid battles"
    assert "arena: no valid battles" in captured.err
    summary = _strict_json(out / "summary.json")
    assert summary["status"] == "no valid battles" and (summary["n_battles"], summary["n_invalid"]) == (0, 4)
    assert summary["elo"] == {"one": None, "two": None} and summary["ci95"] == {"one": None, "two": None}
    assert summary["position_bias"]["first_wins"] is None and summary["position_bias"]["consistency"] is None
    assert summary["judging"]["failure_reasons"] == {"no single [[A]]/[[B]]/[[C]] verdict (after 3 tries)": 4}
    md = (out / "report.md").read_text()
    _assert_names_judge(summary, md, "http:undecided@")
    assert "No valid battles" in md and "1000" not in md.split("## Ratings")[1].split("##")[0]
    assert not (out / "elo.png").exists()


def test_arena_leaves_a_model_without_valid_verdicts_unrated():
    battles = [Battle(f"p{i}", "a", "b", "A") for i in range(3)] + [Battle("p0", "a", "c", None),
                                                                     Battle("p0", "c", "b", None)]
    result = rate_arena(battles, bootstrap=10)
    assert result.status == "ok" and result.elo["c"] is None and result.ci["c"] is None
    assert result.elo["a"] > 1000.0 > result.elo["b"]
    assert result.summary()["ci95"]["c"] is None


def test_aggregate_of_a_run_that_scored_nothing_says_why(tmp_path, data_dir):
    # Every verdict unparseable: the run leaves its meta and failures, and no score file.
    responses = _write_lines(tmp_path / "r.jsonl", [{"index": 10, "response": "BAD ANSWER"}])
    scores = tmp_path / "s.jsonl"
    with OpenAIStub(answer=lambda content: "no json") as server:
        main(["eval", "writingbench", "score", "--responses", responses, "--judge", server.url,
              "--judge-model", "critic", "--output", str(scores), "--data-dir", str(data_dir), "--indices", "10"])
    assert not scores.exists()
    assert main(["eval", "writingbench", "aggregate", "--scores", str(scores), "--data-dir", str(data_dir),
                 "--output", str(tmp_path / "agg.json")]) == 0
    agg = _strict_json(tmp_path / "agg.json")
    assert agg["count"] == 0 and agg["overall"] is None
    assert agg["judging"]["judge"].startswith("http:critic@") and agg["judging"]["mode"] == "generate"
    assert agg["judging"]["failure_reasons"] == {"unparseable verdict (after 15 tries)": 1}
    # without a meta file (no score run here) a missing score file is still an error
    assert main(["eval", "writingbench", "aggregate", "--scores", str(tmp_path / "none.jsonl"),
                 "--data-dir", str(data_dir)]) == 2
