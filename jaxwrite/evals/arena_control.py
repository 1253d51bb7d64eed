"""Length- and style-controlled arena ratings, and the judge's length bias.

LLM judges prefer longer answers, and an arena of long-form writing compares exactly the outputs where that
bias is strongest. Beside the raw Bradley–Terry/Elo fit (`arena.rate_arena`), each verdict is modelled as

    P(A beats B) = sigmoid(theta_A - theta_B + sum_f beta_f * x_f(A, B))

a logistic Bradley–Terry model with covariates of the pair (AlpacaEval's length-controlled win rate and
Arena-Hard's style control do the same): theta is what a model is worth to the judge once the covariates
are accounted for, beta what the judge pays for them.

- length-controlled: x = log of the pair's length ratio (words as every scorer counts them:
  `jaxwrite.text.count_words`, plus one so an empty answer has a length);
- style-controlled: that, plus for each markdown feature (headers, list items, bold spans) the normalised
  difference (n_A - n_B) / (n_A + n_B) (0 when neither has any), as Arena-Hard's style control.

Covariates are divided by their standard deviation over the battles (coefficients are per SD and the fit
is well conditioned); a feature with no variation is left out and named. Ties count half, as in the raw
fit. Intervals: the same bootstrap over prompts as the raw Elo, each sample refitted with the full data's
scaling. A fit needs at least `MIN_BATTLES_PER_PARAMETER` valid battles per free parameter and two rated
models; otherwise it says why in one line and the raw Elo still stands.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Mapping, Sequence

import numpy as np

from jaxwrite.evals.arena import ELO_ANCHOR, ELO_SCALE, Battle, damped_newton
from jaxwrite.text import count_words

MIN_BATTLES_PER_PARAMETER = 5
LENGTH = ("length",)
STYLE = ("length", "headers", "list_items", "bold")
_HEADER = re.compile(r"^ {0,3}#{1,6}\s+\S", re.MULTILINE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)[^*\n]+?\*\*|__(?=\S)[^_\n]+?__")
LENGTH_BINS = (-math.inf, -1.0, -0.5, -0.25, -0.1, 0.1, 0.25, 0.5, 1.0, math.inf)   # edges of log length ratio


def style_features(text: str) -> dict[str, int]:
    """{length (words), headers, list_items, bold} of one answer."""
    return {"length": count_words(text), "headers": len(_HEADER.findall(text)),
            "list_items": len(_LIST_ITEM.findall(text)), "bold": len(_BOLD.findall(text))}


def log_length_ratio(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    return math.log((a["length"] + 1) / (b["length"] + 1))


def pair_covariates(a: Mapping[str, int], b: Mapping[str, int], features: Sequence[str]) -> list[float]:
    """The covariates of A against B (see the module note), in `features` order."""
    out = []
    for f in features:
        if f == "length":
            out.append(log_length_ratio(a, b))
        else:
            total = a[f] + b[f]
            out.append((a[f] - b[f]) / total if total else 0.0)
    return out


def _score(verdict: str) -> float:
    return {"A": 1.0, "B": 0.0, "C": 0.5}[verdict]


def fit_logistic_bt(pairs: np.ndarray, y: np.ndarray, x: np.ndarray, weights: np.ndarray, n_models: int,
                    prior: float = 0.01, max_iter: int = 50, tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """(theta [models], mean 0; beta [covariates]) maximising the weighted Bernoulli likelihood of `y`
    (1 A won, 0 B won, 0.5 a tie) plus a Gaussian prior of precision `prior` on every parameter.

    pairs: [battles, 2] model indices (A, B); x: [battles, covariates]; weights: [battles]. Newton steps
    (IRLS) with step halving; the prior keeps a model that wins every game finite."""
    n, k = x.shape
    design = np.zeros((n, n_models + k))                      # [battles, models + covariates]
    design[np.arange(n), pairs[:, 0]] += 1.0
    design[np.arange(n), pairs[:, 1]] -= 1.0
    design[:, n_models:] = x
    params = np.zeros(n_models + k)

    def objective(p: np.ndarray) -> float:
        z = design @ p
        return float(np.sum(weights * (y * z - np.logaddexp(0.0, z))) - 0.5 * prior * p @ p)

    def newton_step(p: np.ndarray) -> np.ndarray:   # IRLS
        prob = 1.0 / (1.0 + np.exp(-(design @ p)))
        grad = design.T @ (weights * (y - prob)) - prior * p
        hess = (design * (weights * prob * (1.0 - prob))[:, None]).T @ design + prior * np.eye(len(p))
        return np.linalg.solve(hess, grad)

    params = damped_newton(objective, newton_step, params, max_iter, tol)
    theta = params[:n_models]
    return theta - theta.mean(), params[n_models:]


@dataclasses.dataclass
class ControlledRating:
    """One controlled fit: `status` "ok" or why it was not fitted (then nothing else is set)."""
    name: str
    features: tuple[str, ...]
    status: str
    elo: dict[str, float] = dataclasses.field(default_factory=dict)
    ci: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    coefficients: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    left_out: tuple[str, ...] = ()      # features without variation in these battles
    n_battles: int = 0

    def summary(self) -> dict:
        out = {"status": self.status, "features": list(self.features), "n_battles": self.n_battles}
        if self.status == "ok":
            out |= {"elo": self.elo, "ci95": {m: list(v) for m, v in self.ci.items()},
                    "coefficients": self.coefficients, "features_left_out": list(self.left_out)}
        return out


def rate_controlled(battles: Sequence[Battle], features_of: Mapping[str, Mapping[str, Mapping[str, int]]],
                    name: str, features: Sequence[str], *, anchor_model: str | None = None, bootstrap: int = 1000,
                    seed: int = 0, prior: float = 0.01) -> ControlledRating:
    """The controlled rating of the models with a valid verdict.

    features_of: {model: {prompt id: `style_features` of its answer}}; features: the covariates
    (LENGTH or STYLE). Elo as the raw fit's (anchor at ELO_ANCHOR), intervals by the same bootstrap over
    prompts (seeded)."""
    valid = [b for b in battles if b.verdict is not None]
    models = sorted({b.model_a for b in valid} | {b.model_b for b in valid})
    x = np.array([pair_covariates(features_of[b.model_a][b.prompt_id], features_of[b.model_b][b.prompt_id],
                                  features) for b in valid]).reshape(len(valid), len(features))  # [battles, k]
    sd = x.std(axis=0) if len(valid) else np.zeros(len(features))
    kept = [i for i, f in enumerate(features) if sd[i] > 1e-12]
    left_out = tuple(f for i, f in enumerate(features) if i not in kept)
    rating = ControlledRating(name, tuple(features), "ok", left_out=left_out, n_battles=len(valid))
    need = MIN_BATTLES_PER_PARAMETER * (max(len(models), 2) - 1 + len(kept))
    if len(models) < 2:
        rating.status = f"not fitted: {len(models)} rated model(s); a rating needs two"
    elif "length" in left_out:
        rating.status = "not fitted: every pair's answers are equally long, so length explains nothing"
    elif len(valid) < need:
        rating.status = (f"not fitted: {len(valid)} valid battles, fewer than the {need} a fit of "
                         f"{len(models) - 1 + len(kept)} parameters needs ({MIN_BATTLES_PER_PARAMETER} per parameter)")
    if rating.status != "ok":
        return rating
    index = {m: i for i, m in enumerate(models)}
    pairs = np.array([(index[b.model_a], index[b.model_b]) for b in valid])   # [battles, 2]
    y = np.array([_score(b.verdict) for b in valid])                          # [battles]
    xs = x[:, kept] / sd[kept]                                                # [battles, kept], per SD
    theta, beta = fit_logistic_bt(pairs, y, xs, np.ones(len(valid)), len(models), prior)
    rating.elo = _elo(theta, models, anchor_model)
    rating.coefficients = {features[i]: {"per_sd": float(b), "sd": float(sd[i]), "per_unit": float(b / sd[i])}
                           for i, b in zip(kept, beta)}
    # Bootstrap over prompts: a sample's weight on a battle is how often its prompt was drawn.
    prompts = sorted({b.prompt_id for b in valid})
    of_prompt = np.array([prompts.index(b.prompt_id) for b in valid])        # [battles]
    rng = np.random.default_rng(seed)
    samples = np.zeros((bootstrap, len(models)))                              # [bootstrap, models]
    for n in range(bootstrap):
        drawn = np.bincount(rng.integers(0, len(prompts), len(prompts)), minlength=len(prompts))
        t, _ = fit_logistic_bt(pairs, y, xs, drawn[of_prompt].astype(float), len(models), prior)
        samples[n] = [v for v in _elo(t, models, anchor_model).values()]
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=0) if bootstrap else (theta * 0, theta * 0)
    rating.ci = {m: ((float(lo[i]), float(hi[i])) if bootstrap else (rating.elo[m], rating.elo[m]))
                 for i, m in enumerate(models)}
    return rating


def _elo(theta: np.ndarray, models: list[str], anchor_model: str | None) -> dict[str, float]:
    shift = theta[models.index(anchor_model)] if anchor_model in models else theta.mean()
    return {m: float(ELO_ANCHOR + ELO_SCALE * (t - shift)) for m, t in zip(models, theta)}


def length_bias(battles: Sequence[Battle], features_of: Mapping[str, Mapping[str, Mapping[str, int]]],
                slope_per_unit: float | None = None) -> dict:
    """How the judge's verdicts follow length: the share of decided battles (no tie, lengths differ)
    the longer answer won, and A's score (ties 1/2) in bins of log(length A / length B).
    `slope_per_unit`: the length-controlled fit's coefficient per unit of log ratio, when fitted."""
    valid = [b for b in battles if b.verdict is not None]
    ratio = [log_length_ratio(features_of[b.model_a][b.prompt_id], features_of[b.model_b][b.prompt_id])
             for b in valid]
    decided = [(r, b.verdict) for r, b in zip(ratio, valid) if b.verdict != "C" and r != 0.0]
    longer = sum((r > 0) == (v == "A") for r, v in decided)
    bins = []
    for lo, hi in zip(LENGTH_BINS, LENGTH_BINS[1:]):
        scores = [_score(b.verdict) for r, b in zip(ratio, valid) if lo <= r < hi]
        bins.append({"low": None if math.isinf(lo) else lo, "high": None if math.isinf(hi) else hi,
                     "battles": len(scores), "a_win_rate": sum(scores) / len(scores) if scores else None})
    return {"longer_wins": longer / len(decided) if decided else None, "decided_battles": len(decided),
            "bins": bins, "log_ratio_coefficient": slope_per_unit,
            "note": "x = log((words of A + 1) / (words of B + 1)); A's score counts a tie as 1/2"}
