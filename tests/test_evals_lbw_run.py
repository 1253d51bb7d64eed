"""LongBench-Write end to end: lengths, judged quality (resumable), report files, CLI."""
import json

import pytest

from jaxwrite.cli import main
from jaxwrite.common import InputError
from jaxwrite.chat import ChatResult
from jaxwrite.evals import length_score, load_longbench_write, score_longbench_write
from test_evals_judge_http import OpenAIStub

VERDICT = ('```json\n{"Analysis": "ok", "Relevance": 5, "Accuracy": 4, "Coherence": 4, "Clarity": 4, '
           '"Breadth and Depth": 3, "Reading Experience": 4}\n```')


class ScriptedJudge:
    label = "scripted:lbw"

    def __init__(self, bad_prompts=(), refused_prompts=()):
        self.bad_prompts = bad_prompts
        self.refused_prompts = refused_prompts   # answered as a server answers a 4xx: a permanent error
        self.requests = []

    def chat(self, requests):
        self.requests += requests
        return [self._answer(r.messages[0]["content"]) for r in requests]

    def _answer(self, content):
        if any(p in content for p in self.refused_prompts):
            return ChatResult(text="", error="HTTP 400: prompt too long", retryable=False)
        return ChatResult(text="nope" if any(p in content for p in self.bad_prompts) else VERDICT)


def _responses(tmp_path, items):
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps({"index": i, "response": r}, ensure_ascii=False) + "\n"
                            for i, r in items), encoding="utf-8")
    return path


def test_length_only_and_judged_runs(tmp_path, data_dir):
    items = load_longbench_write(data_dir, "longwrite_ruler")  # lengths 1000.. 30000
    # item 1 wants 1000 words: 500 English words (after the think block is dropped); item 2: 2000 CJK chars
    responses = _responses(tmp_path, [(1, "<think>plan plan</think>\n\n" + "word " * 500),
                                      (2, "字" * 2000), (3, "")])
    out = tmp_path / "out"
    summary = score_longbench_write(responses, out, data_dir, subset="longwrite_ruler", progress=False)
    expected = [length_score(items[0].length, 500), length_score(items[1].length, 2000), 0.0]
    assert summary["S_l"] == pytest.approx(sum(expected) / 3)
    assert (summary["answered"], summary["missing"], summary["S_q"], summary["S"]) == (3, 45, None, None)
    rows = [json.loads(l) for l in (out / "lengths.jsonl").read_text().splitlines()]
    assert [r["produced"] for r in rows] == [500, 2000, 0]
    for name in ("summary.json", "report.md", "report.html", "length_plot.png"):
        assert (out / name).exists()

    judge = ScriptedJudge(bad_prompts=[items[2].prompt])
    judged = score_longbench_write(responses, out, data_dir, subset="longwrite_ruler", judge=judge,
                                   progress=False)
    assert judged["quality_items"] == 2 and judged["quality_dropped"] == 1
    assert len(judge.requests) == 2 + 5                  # the bad item was tried 5 times
    assert judged["quality"]["Relevance"] == 100.0 and judged["quality"]["Breadth and Depth"] == 50.0
    assert judged["S_q"] == pytest.approx((100 + 75 * 4 + 50) / 6)
    assert judged["S"] == pytest.approx((judged["S_l"] + judged["S_q"]) / 2)
    assert "<think>" not in judge.requests[0].messages[0]["content"]
    # resume: judged items are not asked again, the dropped one is retried
    again = ScriptedJudge()
    score_longbench_write(responses, out, data_dir, subset="longwrite_ruler", judge=again, progress=False)
    assert len(again.requests) == 1
    assert len((out / "quality.jsonl").read_text().splitlines()) == 3


def test_report_words_dropped_items_by_failure_kind(tmp_path, data_dir):
    items = load_longbench_write(data_dir, "longwrite_ruler")
    responses = _responses(tmp_path, [(1, "word " * 50), (2, "word " * 50), (3, "word " * 50)])
    judge = ScriptedJudge(bad_prompts=[items[1].prompt], refused_prompts=[items[2].prompt])
    out = tmp_path / "out"
    summary = score_longbench_write(responses, out, data_dir, subset="longwrite_ruler", judge=judge,
                                    progress=False)
    assert summary["quality_dropped"] == 2
    assert summary["quality_dropped_by_kind"] == {"permanent": 1, "transient": 0, "unparseable": 1}
    assert len(judge.requests) == 1 + 5 + 1     # the refused item was asked once, the garbled one 5 times
    report = (out / "report.md").read_text()
    assert ("dropped this run: 2 (1 by a permanent judge error, asked once (a re-run fails the same way); "
            "1 with no parseable verdict in 5 tries") in report
    assert "unparseable tries" not in report and "transient" not in report


def test_cli_with_local_openai_server(tmp_path, data_dir, capsys):
    responses = _responses(tmp_path, [(1, "Christmas cactus " * 50)])
    with OpenAIStub(answer=lambda content: VERDICT) as server:
        rc = main(["eval", "longbench-write", "score", "--responses", str(responses), "--output",
                   str(tmp_path / "o"), "--data-dir", str(data_dir), "--judge", server.url,
                   "--judge-model", "gpt-4o-2024-05-13"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["S_l"] == 100.0 and summary["answered"] == 1 and summary["missing"] == 119
    assert server.calls[0]["temperature"] == 0.5 and server.calls[0]["max_tokens"] == 1024
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["S"] == summary["S"]


def test_cli_requires_both_judge_flags(tmp_path, data_dir, capsys):
    responses = _responses(tmp_path, [(1, "x")])
    rc = main(["eval", "longbench-write", "score", "--responses", str(responses), "--output", str(tmp_path),
               "--data-dir", str(data_dir), "--judge", "http://127.0.0.1:1/v1"])
    assert rc == 2 and "--judge http://127.0.0.1:1/v1: expected --judge-model NAME" in capsys.readouterr().err


def test_think_answer_responses_count_answer_words_only(tmp_path, data_dir):
    items = load_longbench_write(data_dir, "longwrite_ruler")
    responses = _responses(tmp_path, [
        (1, "<think>" + "plan " * 900 + "</think>\n<answer>" + "word " * 500),   # stopped at </answer>
        (2, "<think>plan</think>\n\n" + "word " * 2000),                          # no <answer>
        (3, "<think>p</think><answer>a</answer><answer>b</answer>"),              # two answers
        (4, "<think>" + "plan " * 1000)])                                         # plan only
    out = tmp_path / "out"
    judge = ScriptedJudge()
    summary = score_longbench_write(responses, out, data_dir, subset="longwrite_ruler", judge=judge,
                                    progress=False)
    # S_l counts the 500 answer words, not the 1,400 of plan + answer; malformed items are not scored
    assert summary["S_l"] == pytest.approx(length_score(items[0].length, 500))
    assert [json.loads(l)["produced"] for l in (out / "lengths.jsonl").read_text().splitlines()] == [500]
    assert (summary["answered"], summary["malformed"], summary["missing"]) == (1, 3, 44)
    (request,) = judge.requests
    assert "word word" in request.messages[0]["content"]
    assert "plan plan" not in request.messages[0]["content"] and "<think>" not in request.messages[0]["content"]
    extraction = json.loads((out / "summary.json").read_text())["answer_extraction"]
    assert (extraction["applied"], extraction["answers"], extraction["malformed"]) == ("think_answer", 1, 3)
    assert extraction["malformed_reasons"] == {"no <answer> block": 2, "text outside blocks after the last block": 1,
                                               "2 <answer> blocks": 1, "<think> not closed": 1}
    report = (out / "report.md").read_text()
    assert "malformed (not scored)" in report and "- 3: 2 <answer> blocks" in report
    assert "| 1 | 0 | 0 | 3 |" in report  # answers extracted, official cut, raw, malformed
    # verdicts judged on other text are never resumed into this metric
    with pytest.raises(InputError, match="answer_extraction"):
        score_longbench_write(responses, out, data_dir, subset="longwrite_ruler", judge=judge,
                              answer_extraction="official_strip", progress=False)
