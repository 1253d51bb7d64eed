"""One answer-extraction rule for generate, the scorers and the arena: only a think/answer model's
<answer> is judged and counted, its plan kept apart, malformed structure counted with reasons and
never scored."""
import json
import types

import pytest

from jaxwrite.cli import main
from jaxwrite.cli._eval_writingbench import ANSWER_EXTRACTION_CHOICES
from jaxwrite.common import InputError
from jaxwrite.evals.responses import answer_extraction_mode, extract_answers, read_answers
from jaxwrite.text import (ANSWER_EXTRACTION_MODES, STOP_STRING, extract_answer, has_answer_tags,
                           resolve_answer_extraction)

WELL = "<think>plan the essay</think>\n<answer>The essay itself."      # stopped at </answer>
NO_ANSWER = "<think>plan</think>\n\nAn essay written outside the blocks."
TWO_ANSWERS = "<think>plan</think><answer>first</answer><answer>second</answer>"
PLAN_ONLY = "<think>only a plan, the budget ran out"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_choices_match_the_modes():
    assert ANSWER_EXTRACTION_CHOICES == ANSWER_EXTRACTION_MODES


def test_think_answer_keeps_plan_apart():
    got = extract_answer(WELL, "think_answer")
    assert (got.text, got.plan, got.source, got.problems) == ("The essay itself.", "plan the essay", "answer", ())
    # closed answers and base-model outputs that continue a prompt ending in <think> read the same
    assert extract_answer(WELL + "</answer>").text == "The essay itself."
    assert extract_answer("plan…</think>\n<answer>text").text == "text"
    # a generation that stopped elsewhere than </answer> has an open answer: malformed
    assert extract_answer(WELL, stopped_at_answer_close=False).problems == ("<answer> not closed",)


@pytest.mark.parametrize("text, problem", [(NO_ANSWER, "no <answer> block"),
                                           (TWO_ANSWERS, "2 <answer> blocks"),
                                           (PLAN_ONLY, "no <answer> block"),
                                           ("<think>p</think><answer> </answer>", "empty <answer>")])
def test_malformed_has_no_text_to_score(text, problem):
    got = extract_answer(text, "think_answer")
    assert got.malformed and got.text is None and got.source == "malformed" and problem in got.problems


def test_other_modes_and_auto():
    assert extract_answer(NO_ANSWER, "official_strip").text == "An essay written outside the blocks."
    assert extract_answer("<think>p</think>\ntext", "official_strip").source == "raw"  # needs two newlines
    assert extract_answer(WELL, "none").text == WELL
    # auto: only an <answer> tag marks a think/answer output; a reasoning model keeps the official cut
    assert extract_answer(NO_ANSWER).source == "stripped" and extract_answer(WELL).source == "answer"
    assert has_answer_tags("x</answer>") and not has_answer_tags(NO_ANSWER)
    assert resolve_answer_extraction("auto", ["plain", NO_ANSWER]) == "official_strip"
    assert resolve_answer_extraction("auto", ["plain"], think_answer_output=True) == "think_answer"
    with pytest.raises(ValueError, match="expected one of auto, think_answer, official_strip, none"):
        extract_answer("x", "strip")


def test_mode_is_checked():
    assert answer_extraction_mode(None) == "auto" and answer_extraction_mode("think_answer") == "think_answer"
    with pytest.raises(InputError, match="expected one of"):
        answer_extraction_mode("answer_only")


def test_file_level_auto_counts_malformed_with_reasons(tmp_path):
    path = _jsonl(tmp_path / "r.jsonl", [{"index": 1, "response": WELL}, {"index": 2, "response": NO_ANSWER},
                                         {"index": 3, "response": TWO_ANSWERS}, {"index": 4, "response": PLAN_ONLY}])
    answers = read_answers(path, valid=range(1, 5), expected="1..4")
    # one <answer> tag makes the whole file think/answer output: index 2 is an answer-less response
    assert answers.applied == "think_answer" and answers.scorable() == {1: "The essay itself."}
    summary = answers.summary()
    assert (summary["mode"], summary["answers"], summary["malformed"]) == ("auto", 1, 3)
    assert summary["malformed_reasons"]["no <answer> block"] == 2
    assert summary["malformed_reasons"]["2 <answer> blocks"] == 1
    assert [m["id"] for m in summary["malformed_items"]] == [2, 3, 4]
    assert answers.summary([1, 3])["malformed"] == 1


def test_generate_records_are_not_parsed_twice(tmp_path):
    records = {1: {"index": 1, "response": "Answer only", "plan": "p", "raw_response": "<think>p</think><answer>"
                   "Answer only", "well_formed": True, "problems": []},
               2: {"index": 2, "response": "<think>p</think>", "plan": "p", "raw_response": "<think>p</think>",
                   "well_formed": False, "problems": ["no <answer> block"]}}
    answers = extract_answers(records)
    assert answers.applied == "think_answer"
    assert answers.scorable() == {1: "Answer only"} and answers.malformed() == {2: ("no <answer> block",)}
    assert extract_answers(records, "none").scorable()[1] == records[1]["raw_response"]
    bad = _jsonl(tmp_path / "bad.jsonl", [dict(records[1], well_formed="yes")])
    with pytest.raises(InputError, match=r"bad.jsonl:1 field 'well_formed': expected true or false"):
        read_answers(bad)


def _completion(i, text, stop):
    return types.SimpleNamespace(request_index=i, sample_index=0, text=text, token_ids=[5] * 3,
                                 finish_reason="stop", prompt_tokens=4, error=None, matched_stop=stop)


def test_generate_think_answer_writes_answer_and_plan(tmp_path, monkeypatch):
    import jaxwrite.infer as infer

    outputs = [(WELL, STOP_STRING), (PLAN_ONLY, None), (TWO_ANSWERS, None)]

    class FakeEngine:
        def __init__(self, model, tokenizer, **kwargs):
            pass

        def stream(self, requests):
            assert all(r.params.stop == (STOP_STRING,) for r in requests)
            return [_completion(i, *outputs[i]) for i in range(len(requests))]

    tokenizer = types.SimpleNamespace(encode_chat=lambda messages: [1, 2, 3])
    monkeypatch.setattr(infer, "Engine", FakeEngine)
    monkeypatch.setattr(infer, "load_for_inference", lambda *a, **k: (None, tokenizer))
    prompts = _jsonl(tmp_path / "p.jsonl", [{"index": i, "query": f"write {i}"} for i in (1, 2, 3)])
    out = tmp_path / "responses.jsonl"
    assert main(["generate", "--model", str(tmp_path), "--input", str(prompts), "--output", str(out),
                 "--think-answer", "en"]) == 0
    well, plan_only, two = [json.loads(l) for l in out.read_text().splitlines()]
    assert (well["response"], well["plan"], well["raw_response"]) == ("The essay itself.", "plan the essay", WELL)
    assert well["well_formed"] and well["problems"] == []
    assert plan_only["response"] == PLAN_ONLY and not plan_only["well_formed"]
    assert plan_only["problems"] == ["<think> not closed", "no <answer> block"]
    assert two["problems"] == ["2 <answer> blocks"]
    # a scorer takes the records as they are: the answer-only `response` of line 1 is not re-parsed
    answers = read_answers(out)
    assert answers.scorable() == {1: "The essay itself."} and set(answers.malformed()) == {2, 3}


def test_arena_compares_answers_only(tmp_path):
    from chat_server_support import scripted_chat_server

    seen = []

    def answer(body):
        user = body["messages"][-1]["content"]
        seen.append(user)
        a = user.split("[Response A]\n")[1].split("\n[End of Response A]")[0]
        b = user.split("[Response B]\n")[1].split("\n[End of Response B]")[0]
        return "[[A]]" if len(a) > len(b) else "[[B]]"

    prompts = _jsonl(tmp_path / "prompts.jsonl", [{"id": i, "prompt": f"write {i}"} for i in range(3)])
    zero = _jsonl(tmp_path / "zero.jsonl", [{"id": 0, "response": "<think>a long secret plan</think>\n<answer>"
                                                                    "short answer</answer>"},
                                            {"id": 1, "response": "<think>plan</think><answer>x</answer>"
                                                                  "<answer>y</answer>"},
                                            {"id": 2, "response": "<think>plan only</think>"}])
    plain = _jsonl(tmp_path / "plain.jsonl", [{"id": i, "response": "a plain answer"} for i in range(3)])
    out = tmp_path / "arena"
    with scripted_chat_server(answer) as url:
        assert main(["eval", "arena", "--responses", str(zero), str(plain), "--prompts", str(prompts),
                     "--judge", url, "--judge-model", "fake", "--output", str(out), "--bootstrap", "5"]) == 0
        assert seen and not any("secret plan" in u or "<answer>" in u for u in seen)
        assert len(seen) == 2  # only prompt 0 has an answer from both models, judged in both orders
        # resuming under another extraction would mix verdicts on different texts: refused
        assert main(["eval", "arena", "--responses", str(zero), str(plain), "--prompts", str(prompts),
                     "--judge", url, "--judge-model", "fake", "--output", str(out),
                     "--answer-extraction", "none"]) == 2
    summary = json.loads((out / "summary.json").read_text())
    zero_x = summary["answer_extraction"]["zero"]
    assert (zero_x["applied"], zero_x["answers"], zero_x["malformed"]) == ("think_answer", 1, 2)
    assert zero_x["malformed_reasons"] == {"2 <answer> blocks": 1, "no <answer> block": 1}
    assert summary["answer_extraction"]["plain"]["applied"] == "official_strip"
    assert summary["elo"]["plain"] > summary["elo"]["zero"]
    report = (out / "report.md").read_text()
    assert "malformed (not scored)" in report and "- 1: 2 <answer> blocks" in report
