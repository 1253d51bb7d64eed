"""Reward registry: length on the parsed answer, format + repetition, batched writing RM, grouping."""
import numpy as np
import pytest

from jaxwrite.rl import (REWARDS, RolloutPrompt, RolloutSample, answer_length_reward, format_reward,
                         make_reward, max_words_for_token_cap, score_groups, words_per_token)

PROMPT = RolloutPrompt(id="p1", text="Write about the sea in about 10 words.", lower=9, upper=11, max_len=21)
ANSWER = "The grey sea rolled in slowly under a heavy autumn sky."  # 11 words
PASTED = ("The committee reviewed the proposal in detail and concluded that the budget was "
          "insufficient for the planned expansion of the northern facility.")


def _sample(text, finish="stop", stop=None, prefilled=False):
    return RolloutSample(text=text, finish_reason=finish, num_tokens=len(text.split()), stop_string=stop,
                         think_prefilled=prefilled)


def test_registry_names_and_options():
    assert REWARDS.names() == ["format", "length", "writing_rm"]
    with pytest.raises(ValueError, match="unexpected options"):
        make_reward("length", scale=2.0)
    with pytest.raises(ValueError, match="score_fn"):
        make_reward("writing_rm")


def test_length_reward_counts_answer_words_only():
    full = _sample(f"<think>plan plan plan plan plan plan</think>\n<answer>{ANSWER}</answer>")
    assert full.answer_words == 11 and full.think_words == 6
    assert answer_length_reward(PROMPT, full) == 1.0
    # Engine stopped at </answer> and left it out: the answer is complete.
    stopped = _sample(f"<think>plan</think><answer>{ANSWER} More words here now", stop="</answer>")
    assert stopped.parsed.well_formed
    assert answer_length_reward(PROMPT, stopped) == pytest.approx((21 - 15) / (21 - 11))
    assert answer_length_reward(PROMPT, _sample("no tags at all, just words")) == 0.0
    prefilled = _sample(f"plan</think><answer>{ANSWER}</answer>", prefilled=True)
    assert prefilled.parsed.well_formed and answer_length_reward(PROMPT, prefilled) == 1.0


def test_malformed_samples_have_no_answer_to_reward():
    """The scorers' extraction rule in the rewards: an unclosed, doubled or missing <answer> is no answer,
    so the length and writing-RM rewards never credit text a reader would not be shown."""
    truncated = _sample(f"<think>plan</think><answer>{ANSWER}", finish="length")
    doubled = _sample(f"<think>plan</think><answer>{ANSWER}</answer><answer>{ANSWER}</answer>")
    plan_only = _sample("<think>plan plan</think>")
    for sample in (truncated, doubled, plan_only):
        assert not sample.parsed.well_formed and sample.answer is None
        assert sample.answer_words == 0 and answer_length_reward(PROMPT, sample) == 0.0
    seen = []
    rm = make_reward("writing_rm", score_fn=lambda pairs: seen.extend(pairs) or [-3.0] * len(pairs))
    scores = rm([PROMPT, PROMPT], [truncated, _sample(f"<think>p</think><answer>{ANSWER}</answer>")])
    assert [a for _, a in seen] == [ANSWER]          # the RM never sees the malformed sample
    np.testing.assert_array_equal(scores, [-3.0, -3.0])
    plain = RolloutSample(text=ANSWER, finish_reason="stop", num_tokens=11, protocol=False)
    assert plain.answer == ANSWER and answer_length_reward(PROMPT, plain) == 1.0


def test_format_reward_structure_and_repetition():
    good = _sample(f"<think>a short plan</think>\n<answer>{ANSWER}</answer>")
    assert format_reward(PROMPT, good) == pytest.approx(1.0, abs=0.05)
    truncated = _sample(f"<think>a short plan</think>\n<answer>{ANSWER}", finish="length")
    assert truncated.truncated and not truncated.parsed.well_formed
    assert format_reward(PROMPT, truncated) == pytest.approx(0.0, abs=0.05)
    two_answers = _sample(f"<think>p</think><answer>{ANSWER}</answer><answer>{ANSWER}</answer>")
    assert format_reward(PROMPT, two_answers) <= 0.0
    looping = _sample("<think>plan</think><answer>" + "\n\n".join([PASTED] * 3) + "</answer>")
    assert looping.parsed.well_formed
    assert format_reward(PROMPT, looping) < 0.4
    # No answer at all: the loop in the raw text is still penalised.
    assert format_reward(PROMPT, _sample("\n\n".join([PASTED] * 3), finish="length")) < -0.5


def test_writing_rm_is_one_batched_call_on_answers():
    calls = []

    def score_fn(pairs):
        calls.append(pairs)
        return [float(len(answer)) for _, answer in pairs]

    rm = make_reward("writing_rm", score_fn=score_fn)
    samples = [_sample(f"<think>p</think><answer>{ANSWER}</answer>"), _sample("<think>p</think> oops"),
               _sample("<think>p</think><answer>Sea</answer>")]
    scores = rm([PROMPT] * 3, samples)
    assert len(calls) == 1
    assert calls[0] == [(PROMPT.text, ANSWER), (PROMPT.text, "Sea")]
    # The sample without an answer ranks with the batch's lowest answer, never above a real one.
    np.testing.assert_array_equal(scores, [len(ANSWER), 3.0, 3.0])
    # A batch without any answer: nothing is scored and nothing is preferred.
    np.testing.assert_array_equal(rm([PROMPT], [_sample("junk")]), [0.0])
    assert len(calls) == 1
    with pytest.raises(ValueError, match="expected 2 scores"):
        make_reward("writing_rm", score_fn=lambda pairs: [1.0])([PROMPT] * 3, samples)
    with pytest.raises(ValueError, match="non-finite"):
        make_reward("writing_rm", score_fn=lambda pairs: [1.0, float("nan")])([PROMPT] * 3, samples)


def test_score_groups_shape_and_order():
    other = RolloutPrompt(id="p2", text="Write a 2-word title.", lower=2, upper=2, max_len=4)
    groups = [[_sample(f"<think>p</think><answer>{ANSWER}</answer>"), _sample("junk")],
              [_sample("<think>p</think><answer>Sea Song</answer>"),
               _sample("<think>p</think><answer>A Sea Song</answer>")]]
    rewards = {"length": make_reward("length"),
               "writing_rm": make_reward("writing_rm", score_fn=lambda pairs: [7.0] * len(pairs))}
    out = score_groups(rewards, [PROMPT, other], groups)
    assert out.shape == (2, 2, 2)
    np.testing.assert_allclose(out[..., 0], [[1.0, 0.0], [1.0, 0.5]])
    assert np.all(out[..., 1] == 7.0)
    with pytest.raises(ValueError, match="equal group sizes"):
        score_groups(rewards, [PROMPT, other], [groups[0], groups[1][:1]])
    with pytest.raises(ValueError, match="differ in length"):
        score_groups(rewards, [PROMPT], groups)


def test_word_cap_from_token_cap():
    assert max_words_for_token_cap(14000, 0.75) == 10500
    assert words_per_token(["one two three", "四五"], [4, 4]) == pytest.approx(5 / 8)
    with pytest.raises(ValueError, match="max_new_tokens"):
        max_words_for_token_cap(0, 0.75)
    with pytest.raises(ValueError, match="words_per_token"):
        max_words_for_token_cap(10, 0.0)
