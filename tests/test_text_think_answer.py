"""The <think>/<answer> protocol: prompts, parsing and WritingBench's judge stripping."""
import pytest

from jaxwrite.text import (STOP_STRING, parse_think_answer, strip_think_for_judge, think_answer_base_prompt,
                           think_answer_messages, think_answer_user_turn)


def test_prompts_carry_protocol_and_query():
    for lang in ("en", "zh"):
        turn = think_answer_user_turn("Write a poem.", lang)
        assert turn.endswith("Write a poem.") and "<think>" in turn and "</answer>" in turn
        assert think_answer_messages("Write a poem.", lang) == [{"role": "user", "content": turn}]
        base = think_answer_base_prompt("Write a poem.", lang)
        assert base.endswith("User: Write a poem.\nAssistant: <think>")
    assert think_answer_user_turn("q", "en") != think_answer_user_turn("q", "zh")
    assert STOP_STRING == "</answer>"
    with pytest.raises(ValueError, match="expected one of en, zh"):
        think_answer_user_turn("q", "fr")


def test_well_formed():
    parsed = parse_think_answer("<think>\nplan it\n</think>\n<answer>\nThe essay.\n</answer>\n")
    assert parsed.well_formed and parsed.problems == []
    assert parsed.plan == "plan it" and parsed.answer == "The essay."


def test_missing_close_tolerated_only_when_stopped_at_stop_string():
    text = "<think>plan</think><answer>Final text"
    assert parse_think_answer(text, stopped_at_answer_close=True).well_formed
    parsed = parse_think_answer(text)
    assert not parsed.well_formed and parsed.problems == ["<answer> not closed"]
    assert parsed.answer == "Final text"


def test_prefilled_think():
    parsed = parse_think_answer("plan</think>\n<answer>Text", stopped_at_answer_close=True, think_prefilled=True)
    assert parsed.well_formed and parsed.plan == "plan" and parsed.answer == "Text"


@pytest.mark.parametrize("text, problem", [
    ("<answer>only</answer>", "no <think> block"),
    ("<think>a</think><think>b</think><answer>x</answer>", "2 <think> blocks"),
    ("<answer>x</answer><think>a</think>", "<answer> before <think>"),
    ("Sure! <think>a</think><answer>x</answer>", "text outside blocks before <think>"),
    ("<think>a</think>between<answer>x</answer>", "text outside blocks before <answer>"),
    ("<think>a</think><answer>x</answer> trailing", "text outside blocks after the last block"),
    ("<think>a</think><answer>  \n</answer>", "empty <answer>"),
    ("<think></think><answer>x</answer>", "empty <think>"),
    ("<think>a</think><answer>x</answer><answer>y</answer>", "2 <answer> blocks"),
    ("<think>a <answer>x</answer>", "<answer> inside <think>"),
    ("<think>still planning", "<think> not closed"),
    ("<think>a</think></think><answer>x</answer>", "</think> without an opening <think>"),
    ("just text", "text outside blocks"),
])
def test_malformed(text, problem):
    parsed = parse_think_answer(text, stopped_at_answer_close=True)
    assert not parsed.well_formed
    assert problem in parsed.problems


def test_no_blocks_at_all():
    parsed = parse_think_answer("plain answer")
    assert parsed.plan is None and parsed.answer is None
    assert parsed.problems == ["text outside blocks", "no <think> block", "no <answer> block"]


def test_strip_think_for_judge():
    assert strip_think_for_judge("<think>p</think>\n\nAnswer</think>\n\nmore") == "Answer</think>\n\nmore"
    assert strip_think_for_judge("<think>p</think>\nAnswer") == "<think>p</think>\nAnswer"  # needs two newlines
    assert strip_think_for_judge("No thinking here.") == "No thinking here."
