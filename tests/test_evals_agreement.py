"""Judge–human agreement: pair building from expert scores, Cohen's κ by hand, order-combined judge labels."""
import json

import pytest

from jaxwrite.common import InputError
from jaxwrite.evals.agreement import (POOL_PATH, build_agreement_pairs, human_label, judge_agreement_pairs,
                                      judge_human_agreement, length_baseline_labels)
from jaxwrite.chat import ChatResult


def test_kappa_and_confusion_by_hand():
    judge = ["A", "A", "B", "B", "Tie", "A", None]
    human = ["A", "B", "B", "B", "Tie", "Tie", "A"]
    r = judge_human_agreement(judge, human, bootstrap=300, seed=1)
    # p_o = 4/6; judge marginals A3 B2 T1, human A1 B3 T2 -> p_e = (3+6+2)/36; kappa = (24-11)/(36-11)
    assert r["n"] == 6 and r["n_unlabelled"] == 1
    assert r["agreement"] == pytest.approx(4 / 6)
    assert r["kappa"] == pytest.approx(13 / 25)
    assert r["confusion"]["A"] == {"A": 1, "B": 1, "Tie": 1}
    assert r["confusion"]["B"] == {"A": 0, "B": 2, "Tie": 0}
    lo, hi = r["agreement_ci95"]
    assert lo <= 4 / 6 <= hi
    assert r == judge_human_agreement(judge, human, bootstrap=300, seed=1)


def test_perfect_agreement_kappa_one():
    labels = ["A", "B", "Tie", "A"]
    assert judge_human_agreement(labels, labels, bootstrap=0)["kappa"] == pytest.approx(1.0)


def test_human_label_tie_margin():
    assert human_label(2.5, 1.5) == "A" and human_label(1.0, 2.0) == "B" and human_label(2.0, 1.5) == "Tie"


def _pool(tmp_path, rows):
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _row(qid, model, scores, response="r"):
    return {"question_id": qid, "prompt": f"prompt {qid}", "model": model, "response": response,
            "human_scores": [{"score": s, "annotation_file": "f"} for s in scores]}


def test_build_pairs_labels_seeded_and_capped(tmp_path):
    rows = [_row("q1", "m1", [3], "long answer"), _row("q1", "m2", [2, 1], "mid"), _row("q1", "m3", [1], "s"),
            _row("q2", "m1", [0]), _row("q2", "m2", [2])]
    pool = _pool(tmp_path, rows)
    pairs = build_agreement_pairs(pool, seed=5)
    assert len(pairs) == 4 and pairs == build_agreement_pairs(pool, seed=5)
    for p in pairs:
        assert p.label == human_label(p.score_a, p.score_b)
        assert p.pair_id.split("|")[0] == p.question_id
    by_id = {p.pair_id: p for p in pairs}
    m1m2 = by_id["q1|m1|m2"]
    assert {m1m2.score_a, m1m2.score_b} == {3.0, 1.5} and m1m2.label in ("A", "B")
    assert by_id["q1|m2|m3"].label == "Tie"
    flips = {tuple(p.model_a for p in build_agreement_pairs(pool, seed=s)) for s in range(6)}
    assert len(flips) > 1  # the seed decides which response is shown first
    assert len(build_agreement_pairs(pool, pairs_per_prompt=1)) == 2
    assert len(build_agreement_pairs(pool, max_pairs=3)) == 3
    assert length_baseline_labels([m1m2])[0] == ("A" if m1m2.model_a == "m1" else "B")


def test_bad_pool_row_names_line_and_field(tmp_path):
    pool = _pool(tmp_path, [_row("q1", "m1", [3]), _row("q1", "m2", [7])])
    with pytest.raises(InputError, match=r"pool.jsonl:2 field 'human_scores'"):
        build_agreement_pairs(pool)


def test_real_pool_pair_counts(data_dir, figure):
    pairs = build_agreement_pairs(str(data_dir / "preferences" / POOL_PATH), seed=0)
    assert sum(p.label != "Tie" for p in pairs) == figure(20287, 159)  # the README's pair count (|Δ| >= 1)
    assert len(pairs) == figure(34866, 336)


class ScoreJudge:
    """Test double: prefers the response with more '+' signs; answers 'first' for 'biased' prompts
    and nothing usable for 'mute' prompts."""
    label = "fake:score"

    def chat(self, requests):
        out = []
        for req in requests:
            user = req.messages[1]["content"]
            a = user.split("[Response A]\n")[1].split("\n[End")[0]
            b = user.split("[Response B]\n")[1].split("\n[End")[0]
            if "mute" in user:
                out.append(ChatResult(text="no idea"))
            elif "biased" in user:
                out.append(ChatResult(text="[[A]]"))
            else:
                out.append(ChatResult(text="[[A]]" if a.count("+") > b.count("+") else
                                      "[[B]]" if b.count("+") > a.count("+") else "[[C]]"))
        return out


def test_judge_labels_combine_orders_and_resume(tmp_path):
    rows = [_row("plain", "m1", [3], "+++"), _row("plain", "m2", [1], "+"),
            _row("biased", "m1", [3], "++"), _row("biased", "m2", [1], "+"),
            _row("mute", "m1", [2], "+"), _row("mute", "m2", [2], "+")]
    pairs = build_agreement_pairs(_pool(tmp_path, rows), seed=0)
    out = str(tmp_path / "verdicts.jsonl")
    labels = judge_agreement_pairs(pairs, ScoreJudge(), out, tries=2, progress=False)
    by_q = {p.question_id: labels[p.pair_id] for p in pairs}
    plain = next(p for p in pairs if p.question_id == "plain")
    assert by_q["plain"] == plain.label  # consistent in both orders
    assert by_q["biased"] == "Tie"  # first position won both times: the orders disagree
    assert by_q["mute"] is None
    again = judge_agreement_pairs(pairs, ScoreJudge(), out, progress=False)
    assert again == labels
    with open(out) as f:
        assert sum(1 for _ in f) == 6
    result = judge_human_agreement([labels[p.pair_id] for p in pairs], [p.label for p in pairs], bootstrap=10)
    assert result["n"] == 2 and result["n_unlabelled"] == 1
