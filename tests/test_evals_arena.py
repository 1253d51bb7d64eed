"""Pairwise arena: verdict parsing, Bradley–Terry/Elo fit, bootstrap CIs, position bias, resumable judging."""
import math

import numpy as np
import pytest

from jaxwrite.common import InputError, read_jsonl
from jaxwrite.evals.arena import (ELO_SCALE, Battle, battles_from_records, fit_bradley_terry,
                                  judge_arena, parse_verdict, plot_elo, position_bias, rate_arena,
                                  win_matrix)
from jaxwrite.chat import ChatResult


@pytest.mark.parametrize("text, expected", [
    ("A is richer.\n[[A]]", "A"),
    ("Verdict: [[ B ]]", "B"),
    ("equally good [[C]]", "C"),
    ("<think>maybe [[A]] or [[B]]</think>Final: [[B]]", "B"),
    ("[[A]] ... actually [[B]]", None),
    ("A is better", None),
    ("[[A]] and again [[A]]", "A"),
])
def test_parse_verdict(text, expected):
    assert parse_verdict(text) == expected


def test_bt_recovers_known_strengths_from_expected_counts():
    theta = np.array([-1.0, 0.0, 0.5, 1.5])
    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    wins = 200 * p * (1 - np.eye(4))  # expected win counts, no sampling noise
    fit = fit_bradley_terry(wins, prior=0.0)
    np.testing.assert_allclose(fit, theta - theta.mean(), atol=1e-6)


def test_bt_recovers_ordering_from_sampled_games():
    rng = np.random.default_rng(0)
    theta = np.array([0.0, 0.4, 0.8, 1.6])
    wins = np.zeros((4, 4))
    for i in range(4):
        for j in range(i + 1, 4):
            k = rng.binomial(300, 1 / (1 + math.exp(theta[j] - theta[i])))
            wins[i, j], wins[j, i] = k, 300 - k
    fit = fit_bradley_terry(wins)
    assert list(np.argsort(fit)) == [0, 1, 2, 3]
    np.testing.assert_allclose(fit, theta - theta.mean(), atol=0.2)


def test_ties_count_half_each_side():
    # A beats B once, two ties: A scores 2 of 3 -> P(A beats B) = 2/3 -> Elo gap 400*log10(2).
    battles = [Battle("p1", "a", "b", "A"), Battle("p2", "a", "b", "C"), Battle("p3", "b", "a", "C")]
    wins = win_matrix(battles, ["a", "b"])
    np.testing.assert_allclose(wins, [[0.0, 2.0], [1.0, 0.0]])
    result = rate_arena(battles, bootstrap=0, prior=0.0)
    assert result.elo["a"] - result.elo["b"] == pytest.approx(400 * math.log10(2), abs=1e-4)
    assert (result.elo["a"] + result.elo["b"]) / 2 == pytest.approx(1000.0)
    assert result.win_rate["a"]["b"] == pytest.approx(2 / 3)


def test_perfect_winner_stays_finite_and_anchor_model():
    battles = [Battle(f"p{i}", "x", "y", "A") for i in range(5)]
    result = rate_arena(battles, bootstrap=0, anchor_model="y")
    assert result.elo["y"] == pytest.approx(1000.0)
    assert math.isfinite(result.elo["x"]) and result.elo["x"] > 1000.0


def _synthetic_battles(seed=1, n_prompts=40):
    rng = np.random.default_rng(seed)
    strength = {"m1": 0.0, "m2": 0.7, "m3": 1.4}
    battles = []
    for p in range(n_prompts):
        for a, b in [("m1", "m2"), ("m2", "m1"), ("m1", "m3"), ("m3", "m1"), ("m2", "m3"), ("m3", "m2")]:
            pa = 1 / (1 + math.exp(strength[b] - strength[a]))
            u = rng.random()
            verdict = "C" if abs(u - pa) < 0.05 else ("A" if u < pa else "B")
            battles.append(Battle(f"p{p}", a, b, verdict))
    return battles


def test_bootstrap_ci_contains_point_estimate_and_is_seeded():
    battles = _synthetic_battles() + [Battle("p0", "m1", "m2", None)]
    r1 = rate_arena(battles, bootstrap=200, seed=3)
    r2 = rate_arena(battles, bootstrap=200, seed=3)
    assert r1.ci == r2.ci
    assert r1.n_invalid == 1 and r1.n_battles == len(battles) - 1
    for m in r1.models:
        lo, hi = r1.ci[m]
        assert lo <= r1.elo[m] <= hi and hi - lo > 1.0
    assert r1.elo["m1"] < r1.elo["m2"] < r1.elo["m3"]
    assert (r1.elo["m3"] - r1.elo["m1"]) / ELO_SCALE == pytest.approx(1.4, abs=0.5)


def test_position_bias_arithmetic():
    battles = [
        Battle("p1", "x", "y", "A"), Battle("p1", "y", "x", "A"),  # first position wins both: inconsistent
        Battle("p2", "x", "y", "A"), Battle("p2", "y", "x", "B"),  # x wins both: consistent
        Battle("p3", "x", "y", "C"), Battle("p3", "y", "x", "C"),  # tie both: consistent
        Battle("p4", "x", "y", "B"), Battle("p4", "y", "x", None),  # one invalid: no pair
    ]
    stats = position_bias(battles)
    assert stats["n_valid"] == 7
    assert stats["first_wins"] == pytest.approx(3 / 7)
    assert stats["second_wins"] == pytest.approx(2 / 7)
    assert stats["ties"] == pytest.approx(2 / 7)
    assert stats["n_pairs_both_orders"] == 3
    assert stats["consistency"] == pytest.approx(2 / 3)


class LongerWinsJudge:
    """Test double: prefers the longer response; answers garbage for the first call on 'flaky'."""
    label = "fake:longer"

    def __init__(self):
        self.calls = 0
        self.flaky_seen = set()

    def chat(self, requests):
        out = []
        for req in requests:
            self.calls += 1
            user = req.messages[1]["content"]
            a = user.split("[Response A]\n")[1].split("\n[End of Response A]")[0]
            b = user.split("[Response B]\n")[1].split("\n[End of Response B]")[0]
            if "never" in user:
                out.append(ChatResult(text="I cannot decide."))
            elif "flaky" in user and req.sampling.seed == 0:
                out.append(ChatResult(text="hmm"))
            else:
                out.append(ChatResult(text="[[A]]" if len(a) > len(b) else "[[B]]" if len(b) > len(a) else "[[C]]"))
        return out


def test_judge_arena_both_orders_resample_and_resume(tmp_path):
    prompts = {1: "write", 2: "flaky prompt", 3: "never prompt", 4: "only in m1"}
    responses = {"short": {1: "a", 2: "b", 3: "c"}, "long": {1: "aaaa", 2: "bbbb", 3: "cccc"},
                 "mid": {1: "aa", 2: "bb", 3: "cc", 4: "x"}}
    out = str(tmp_path / "verdicts.jsonl")
    judge = LongerWinsJudge()
    records = judge_arena(prompts, responses, judge, out, batch_size=4, tries=2, progress=False)
    assert len(records) == 3 * 3 * 2  # 3 pairs x 3 shared prompts x 2 orders
    assert len({r["key"] for r in records}) == len(records)
    flaky = [r for r in records if r["prompt_id"] == 2]
    assert all(r["tries"] == 2 and r["verdict"] in "AB" for r in flaky)
    never = [r for r in records if r["prompt_id"] == 3]
    assert all(r["verdict"] is None for r in never)
    calls = judge.calls
    again = judge_arena(prompts, responses, judge, out, progress=False)
    assert judge.calls == calls and len(again) == len(records)
    assert len(list(read_jsonl(out))) == len(records)
    result = rate_arena(battles_from_records(again), bootstrap=50)
    assert result.n_invalid == 6
    assert result.elo["long"] > result.elo["mid"] > result.elo["short"]
    assert result.position["consistency"] == 1.0
    png = plot_elo(result, str(tmp_path / "elo.png"))
    assert (tmp_path / "elo.png").stat().st_size > 1000 and png.endswith("elo.png")


class DownJudge:
    label = "fake:down"

    def chat(self, requests):
        return [ChatResult(text="", error="HTTP 503: overloaded") for _ in requests]


def test_judge_errors_are_not_recorded_and_retried_on_rerun(tmp_path):
    prompts = {1: "p"}
    responses = {"x": {1: "aa"}, "y": {1: "a"}}
    out = str(tmp_path / "v.jsonl")
    assert judge_arena(prompts, responses, DownJudge(), out, progress=False) == []
    records = judge_arena(prompts, responses, LongerWinsJudge(), out, progress=False)
    assert sorted(r["verdict"] for r in records) == ["A", "B"]


def test_resume_refuses_verdicts_from_another_judge(tmp_path):
    out = str(tmp_path / "v.jsonl")
    judge_arena({1: "p"}, {"x": {1: "aa"}, "y": {1: "a"}}, LongerWinsJudge(), out, progress=False)
    other = LongerWinsJudge()
    other.label = "fake:other"
    with pytest.raises(InputError, match=r"v.jsonl:1 field 'judge'"):
        judge_arena({1: "p"}, {"x": {1: "aa"}, "y": {1: "a"}}, other, out, progress=False)
