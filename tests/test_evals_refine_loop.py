"""RefineBench loop: modes, early stop, partial subsets, unparseable judge output, resume, metrics."""
import json
import re

import pytest

from jaxwrite.common import InputError, read_jsonl
from jaxwrite.chat import ChatResult
from jaxwrite.evals.refinebench_data import Problem
from jaxwrite.evals.refinebench_loop import RefineConfig, revealed_items, run_refinebench
from jaxwrite.evals.refinebench_metrics import plot_curves, refinebench_metrics
from jaxwrite.evals.refinebench_prompts import DONE_MARKER, parse_checklist


def _problem(index, words, field="Math", exam_type="Exact Match", question="Q"):
    return Problem(index=index, field=field, subject="s", exam_type=exam_type, question=question,
                   checklist=tuple(f"Does the response mention {w}?" for w in words),
                   reference_answer=("ref",), context=(), source="test")


class KeywordModel:
    """Test double: answers with the words it starts with plus every word named in feedback so far;
    in self mode it declares done on its third turn."""
    label = "fake:model"

    def __init__(self, fail_index=None):
        self.calls = 0
        self.fail_index = fail_index

    def chat(self, requests):
        out = []
        for req in requests:
            self.calls += 1
            first = req.messages[0]["content"]
            if self.fail_index and self.fail_index in first:
                out.append(ChatResult(text="", error="HTTP 500"))
                continue
            words = set(re.findall(r"start:(\w+)", first))
            for m in req.messages[1:]:
                if m["role"] == "user":
                    words |= set(re.findall(r"mention (\w+)\?", m["content"]))
            turn = 1 + sum(m["role"] == "assistant" for m in req.messages)
            if "review your previous answer" in req.messages[-1]["content"].lower() and turn == 3:
                out.append(ChatResult(text=f"<think>fine</think>{DONE_MARKER}"))
            else:
                out.append(ChatResult(text=f"<think>plan</think>answer v{turn}: " + " ".join(sorted(words))))
        return out


class KeywordJudge:
    """Test double: item k is met when its word appears in the response; garbage for 'broken' problems."""
    label = "fake:judge"

    def __init__(self):
        self.calls = 0

    def chat(self, requests):
        out = []
        for req in requests:
            self.calls += 1
            user = req.messages[1]["content"]
            assert "[Reference answer]\nref" in user and "plan" not in user  # judge sees the answer only
            if "broken" in user:
                out.append(ChatResult(text="I refuse"))
                continue
            response = user.split("[Response]\n")[1].split("\n\n[Checklist]")[0]
            items = re.findall(r"(\d+)\. Does the response mention (\w+)\?", user.split("[Checklist]")[1])
            marks = {k: ("Yes" if w in response.split() else "No") for k, w in items}
            out.append(ChatResult(text="```json\n" + json.dumps(marks) + "\n```"))
        return out


def test_parse_checklist():
    assert parse_checklist('{"1": "Yes", "2": "no"}', 2) == [True, False]
    assert parse_checklist('<think>{"1": "No"}</think> ok {"1": "Yes"}', 2) == [True, None]
    assert parse_checklist("Yes Yes", 2) is None


def test_guided_fixes_everything_and_stops(tmp_path):
    problems = [_problem("p1", ["alpha", "beta", "gamma"], question="start:alpha"),
                _problem("p2", ["delta"], question="start:delta", field="Law", exam_type="Free Form")]
    out = str(tmp_path / "g.jsonl")
    recs = run_refinebench(problems, KeywordModel(), KeywordJudge(), out, RefineConfig(mode="guided", turns=5),
                           progress=False)
    p1 = [r for r in recs if r["index"] == "p1"]
    assert [r["satisfied"] for r in p1] == [1, 3] and p1[-1]["stop"] == "all_satisfied"
    p2 = [r for r in recs if r["index"] == "p2"]
    assert len(p2) == 1 and p2[0]["stop"] == "all_satisfied"
    m = refinebench_metrics(recs, problems, turns=5)
    assert m["overall"]["acc"] == pytest.approx([50.0] + [100.0] * 4)
    assert m["overall"]["pass"] == pytest.approx([50.0] + [100.0] * 4)
    assert m["overall"]["acc_macro"][0] == pytest.approx(100 * (1 / 3 + 1) / 2)
    assert m["by_field"]["Law"]["pass"] == [100.0] * 5
    assert m["by_exam_type"]["Exact Match"]["acc"][0] == pytest.approx(100 / 3)
    assert m["incomplete"] == 0 and m["mean_turns_used"] == 1.5
    plot_curves(m, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_self_mode_declares_done_and_carries_forward(tmp_path):
    problems = [_problem("p1", ["alpha", "beta"], question="start:alpha")]
    recs = run_refinebench(problems, KeywordModel(), KeywordJudge(), str(tmp_path / "s.jsonl"),
                           RefineConfig(mode="self", turns=5), progress=False)
    assert [r["turn"] for r in recs] == [1, 2, 3]
    assert recs[2]["done"] and recs[2]["stop"] == "done" and recs[2]["judge_tries"] == 0
    assert recs[2]["marks"] == recs[1]["marks"] == [True, False]
    m = refinebench_metrics(recs, problems, turns=5)
    assert m["overall"]["acc"] == [50.0] * 5 and m["stop_reasons"] == {"done": 1}


def test_partial_reveals_fixed_subset(tmp_path):
    words = ["a1", "a2", "a3", "a4", "a5"]
    problem = _problem("p9", words, question="start:none")
    shown = revealed_items(problem, 0.5, seed=7)
    assert len(shown) == 2 and shown == revealed_items(problem, 0.5, seed=7)
    recs = run_refinebench([problem], KeywordModel(), KeywordJudge(), str(tmp_path / "p.jsonl"),
                           RefineConfig(mode="partial", turns=3, partial_ratio=0.5, seed=7), progress=False)
    assert all(r["revealed"] == shown for r in recs)
    assert [r["satisfied"] for r in recs] == [0, 2, 2]  # only the revealed two get fixed
    assert recs[1]["marks"] == [i in shown for i in range(5)]


def test_unparseable_judge_counts_no_and_is_counted(tmp_path):
    problems = [_problem("p1", ["x", "y"], question="start:x broken")]
    judge = KeywordJudge()
    recs = run_refinebench(problems, KeywordModel(), judge, str(tmp_path / "u.jsonl"),
                           RefineConfig(mode="guided", turns=2, tries=3), progress=False)
    assert judge.calls == 6 and all(r["judge_tries"] == 3 for r in recs)
    assert all(r["marks"] == [False, False] and r["unparsed"] == 2 for r in recs)
    m = refinebench_metrics(recs, problems, turns=2)
    assert m["judge_unparsed_items"] == 4 and m["judge_calls_unparsed"] == 2


def test_resume_continues_and_model_failures_are_not_recorded(tmp_path):
    problems = [_problem("p1", ["alpha", "beta", "gamma"], question="start:alpha"),
                _problem("p2", ["x", "y"], question="start:x")]
    out = str(tmp_path / "r.jsonl")
    cfg = RefineConfig(mode="self", turns=2)
    run_refinebench(problems, KeywordModel(fail_index="start:x"), KeywordJudge(), out, cfg, progress=False)
    assert {r["index"] for _, r in read_jsonl(out)} == {"p1"}
    model = KeywordModel()
    recs = run_refinebench(problems, model, KeywordJudge(), out, cfg, progress=False)
    assert model.calls == 2  # only p2's two turns
    assert sorted((r["index"], r["turn"]) for r in recs) == [("p1", 1), ("p1", 2), ("p2", 1), ("p2", 2)]
    longer = run_refinebench(problems, model, KeywordJudge(), out, RefineConfig(mode="self", turns=3),
                             progress=False)
    assert model.calls == 4 and all(r["stop"] == "done" for r in longer if r["turn"] == 3)
    with pytest.raises(InputError, match="r.jsonl:1 field 'mode'"):
        run_refinebench(problems, model, KeywordJudge(), out, RefineConfig(mode="guided"), progress=False)


def test_metrics_hand_computed_carry_forward():
    problems = [_problem("a", ["1", "2"]), _problem("b", ["1", "2", "3", "4"], field="Law")]
    recs = [
        {"index": "a", "turn": 1, "satisfied": 1, "total": 2, "unparsed": 0, "done": False, "stop": None},
        {"index": "a", "turn": 2, "satisfied": 2, "total": 2, "unparsed": 0, "done": False, "stop": "all_satisfied"},
        {"index": "b", "turn": 1, "satisfied": 0, "total": 4, "unparsed": 4, "done": False, "stop": None},
    ]
    m = refinebench_metrics(recs, problems, turns=3)
    assert m["overall"]["acc"] == pytest.approx([100 / 6, 200 / 6, 200 / 6])
    assert m["overall"]["pass"] == pytest.approx([0.0, 50.0, 50.0])
    assert m["incomplete"] == 1 and m["stop_reasons"] == {"all_satisfied": 1, "incomplete": 1}
    assert m["by_field"]["Law"]["acc"] == [0.0, 0.0, 0.0]
