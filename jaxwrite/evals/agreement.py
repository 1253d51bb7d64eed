"""Judge–human agreement on WritingPreferenceBench pairs: A/B/Tie labels from expert scores, a pairwise
judge's labels, agreement rate, Cohen's κ (3 classes), confusion matrix and bootstrap CIs.

Human labels: each response's score is the mean of its expert scores (0–3); within one question_id every
pair of responses is a candidate; Tie when |Δ| < 1, else the better one. Candidates are enumerated in a
fixed order (question_id, then model names), and one seeded generator decides, in that order, the
optional per-prompt subsample, which response is shown as A, and the optional overall cap — so a seed
gives the same pairs on every machine. The judge uses the arena's pairwise prompt (jaxwrite's own).
With both orders, a pair's judge label is the shared verdict when the two orders agree and Tie when
they disagree; a pair with an unparseable (or, after judge errors, missing) verdict gets no label and
is counted, not scored.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import numpy as np

from jaxwrite.chat import ChatModel
from jaxwrite.common import InputError, read_jsonl
from jaxwrite.evals.arena import PairJob, judge_pairwise

LABELS = ("A", "B", "Tie")
POOL_PATH = "writingpreferencebench_zh_pool/responses_with_human_scores.jsonl.gz"  # under preferences/


@dataclasses.dataclass(frozen=True)
class HumanPair:
    pair_id: str  # question_id + both model names, order-free
    question_id: str
    prompt: str
    model_a: str
    model_b: str
    response_a: str
    response_b: str
    score_a: float  # mean expert score
    score_b: float
    label: str  # "A" | "B" | "Tie"


def _mean_score(rec: dict, path: str, line: int) -> float:
    scores = rec["human_scores"]
    if not isinstance(scores, list) or not scores or not all(
            isinstance(s, dict) and isinstance(s.get("score"), int) and 0 <= s["score"] <= 3 for s in scores):
        raise InputError("expected a non-empty list of {score: 0..3}", path=path, line=line, field="human_scores")
    return sum(s["score"] for s in scores) / len(scores)


def human_label(score_a: float, score_b: float, tie_margin: float = 1.0) -> str:
    delta = score_a - score_b
    return "Tie" if abs(delta) < tie_margin else ("A" if delta > 0 else "B")


def build_agreement_pairs(pool_path: str, seed: int = 0, pairs_per_prompt: int | None = None,
                          max_pairs: int | None = None, tie_margin: float = 1.0) -> list[HumanPair]:
    """Every within-prompt response pair with its human A/B/Tie label (see module docstring)."""
    groups: dict[str, dict[str, tuple[dict, float]]] = {}
    for line, rec in read_jsonl(pool_path, required=("question_id", "prompt", "model", "response",
                                                     "human_scores")):
        by_model = groups.setdefault(str(rec["question_id"]), {})
        if rec["model"] in by_model:
            raise InputError("duplicate model for this question_id", path=pool_path, line=line, field="model")
        by_model[rec["model"]] = (rec, _mean_score(rec, pool_path, line))
    rng = np.random.default_rng(seed)
    pairs = []
    for qid in sorted(groups):
        combos = list(itertools.combinations(sorted(groups[qid]), 2))
        if pairs_per_prompt is not None and len(combos) > pairs_per_prompt:
            keep = sorted(rng.choice(len(combos), size=pairs_per_prompt, replace=False))
            combos = [combos[i] for i in keep]
        for m1, m2 in combos:
            first, second = (m2, m1) if rng.random() < 0.5 else (m1, m2)
            (ra, sa), (rb, sb) = groups[qid][first], groups[qid][second]
            pairs.append(HumanPair(f"{qid}|{m1}|{m2}", qid, ra["prompt"], first, second, ra["response"],
                                   rb["response"], sa, sb, human_label(sa, sb, tie_margin)))
    if max_pairs is not None and len(pairs) > max_pairs:
        pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), size=max_pairs, replace=False))]
    return pairs


_SWAP = {"A": "B", "B": "A", "C": "C"}
_AS_LABEL = {"A": "A", "B": "B", "C": "Tie"}


def judge_agreement_pairs(pairs: Sequence[HumanPair], judge: ChatModel, out_path: str, *,
                          both_orders: bool = True, **kwargs) -> dict[str, str | None]:
    """{pair_id: judge label or None}; verdicts resumable in `out_path`; kwargs go to judge_pairwise."""
    jobs = []
    for p in pairs:
        jobs.append(PairJob(f"{p.pair_id}|ab", p.prompt, p.response_a, p.response_b,
                            {"pair_id": p.pair_id, "order": "ab"}))
        if both_orders:
            jobs.append(PairJob(f"{p.pair_id}|ba", p.prompt, p.response_b, p.response_a,
                                {"pair_id": p.pair_id, "order": "ba"}))
    done = judge_pairwise(jobs, judge, out_path, desc="agreement", **kwargs)
    labels: dict[str, str | None] = {}
    for p in pairs:
        first = done.get(f"{p.pair_id}|ab", {}).get("verdict")
        second = _SWAP.get(done.get(f"{p.pair_id}|ba", {}).get("verdict")) if both_orders else first
        if first is None or second is None:
            labels[p.pair_id] = None
        else:
            labels[p.pair_id] = _AS_LABEL[first] if first == second else "Tie"
    return labels


def length_baseline_labels(pairs: Sequence[HumanPair]) -> list[str]:
    """The longer response (in characters) wins: the control reported beside every judge's
    agreement figures (a judge that cannot beat it is only counting length)."""
    return ["A" if len(p.response_a) > len(p.response_b) else "B" if len(p.response_b) > len(p.response_a)
            else "Tie" for p in pairs]


def _kappa(confusion: np.ndarray) -> float:
    n = confusion.sum()
    observed = np.trace(confusion) / n
    expected = float(confusion.sum(axis=1) @ confusion.sum(axis=0)) / n ** 2
    return float("nan") if expected == 1.0 else float((observed - expected) / (1.0 - expected))


def judge_human_agreement(judge_labels: Sequence[str | None], human_labels: Sequence[str],
                          bootstrap: int = 1000, seed: int = 0) -> dict:
    """Agreement rate, Cohen's κ over {A, B, Tie}, confusion[judge][human] and 95% bootstrap CIs.

    Positions with no judge label (None) are left out and counted as `n_unlabelled`.
    """
    if len(judge_labels) != len(human_labels):
        raise ValueError(f"{len(judge_labels)} judge labels vs {len(human_labels)} human labels")
    index = {label: k for k, label in enumerate(LABELS)}
    kept = [(index[j], index[h]) for j, h in zip(judge_labels, human_labels) if j is not None]
    result: dict = {"n": len(kept), "n_unlabelled": len(judge_labels) - len(kept), "labels": list(LABELS)}
    if not kept:
        return result
    codes = np.array(kept)  # [n, 2] judge, human
    confusion = np.zeros((3, 3), dtype=np.int64)  # [judge label, human label]
    np.add.at(confusion, (codes[:, 0], codes[:, 1]), 1)
    # Resampling n pairs with replacement draws the 9 confusion cells from a multinomial with the
    # observed cell frequencies, so each bootstrap replicate is one multinomial draw.
    rng = np.random.default_rng(seed)
    agree, kappa = [], []
    for cells in rng.multinomial(len(codes), confusion.ravel() / len(codes), size=bootstrap):
        m = cells.reshape(3, 3)  # [judge label, human label]
        agree.append(np.trace(m) / len(codes))
        kappa.append(_kappa(m))
    ci = lambda xs: [float(v) for v in np.nanpercentile(xs, [2.5, 97.5])] if bootstrap else None
    result.update(agreement=float(np.trace(confusion) / len(codes)), kappa=_kappa(confusion),
                  confusion={LABELS[j]: {LABELS[h]: int(confusion[j, h]) for h in range(3)} for j in range(3)},
                  agreement_ci95=ci(agree), kappa_ci95=ci(kappa))
    return result
