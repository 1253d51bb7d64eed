"""Pairwise arena (Arena-Write style): every model pair judged on every shared prompt in both orders,
then a Bradley–Terry fit mapped to an Elo scale with bootstrap confidence intervals.

The LongWriter-Zero paper publishes neither its Arena-Write judge prompt nor its Elo constants, so the
prompt, the verdict format ("[[A]]" / "[[B]]" / "[[C]]" = tie) and the constants below are jaxwrite's
own (labelled "reimplementation" in every report). Constants: Elo = anchor + 400/ln(10) · θ, where θ
are natural-log BT strengths; the anchor puts the mean rating (or a chosen baseline model) at 1000.

Verdicts are appended one per line as they arrive, keyed by prompt id + model pair + order, so a killed
run resumes where it stopped. An output that names no single verdict is re-sampled, then recorded as
invalid: counted in the report and left out of the ratings, never scored as a tie.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import re
from typing import Callable, Iterable, Sequence

import numpy as np

from jaxwrite.chat import ChatModel, ChatRequest, SamplingParams, ask_until_valid, describe_model
from jaxwrite.common import InputError, RecordJob
from jaxwrite.common.record_job import ProcessShard
from jaxwrite.evals.judges import require_generating_judge
from jaxwrite.evals.judging import failure_reason

ELO_SCALE = 400.0 / math.log(10.0)  # Elo points per natural-log unit of BT strength
ELO_ANCHOR = 1000.0
PROMPT_LABEL = "jaxwrite pairwise judge prompt (reimplementation; Arena-Write prompt unpublished)"

PAIRWISE_SYSTEM = (
    "You are an impartial expert judge of long-form writing. You will see a writing request and two "
    "responses, A and B. Decide which response better fulfils the request: relevance to every "
    "instruction, accuracy, depth and substance, organisation and coherence, style and fluency, and "
    "whether its length suits the request. Do not let the order of the responses, their length alone, "
    "or the names of any assistants influence you. Explain your comparison briefly, then give your "
    "final verdict on the last line, exactly one of: \"[[A]]\" if A is better, \"[[B]]\" if B is "
    "better, \"[[C]]\" if they are equally good.")
PAIRWISE_USER = ("[Writing request]\n{prompt}\n\n[Response A]\n{response_a}\n[End of Response A]\n\n"
                 "[Response B]\n{response_b}\n[End of Response B]")

_VERDICT = re.compile(r"\[\[\s*([ABC])\s*\]\]")
PAIRWISE_TRIES = 3  # samples per judgement before it is recorded as invalid


def pairwise_judge_info(judge: ChatModel, temperature: float, max_tokens: int, seed: int,
                        tries: int = PAIRWISE_TRIES) -> dict:
    """The judge's description with the pairwise sampling it is asked with (`judge_pairwise`'s first
    try; re-samples run at temperature >= 0.7 with the next seeds)."""
    return describe_model(judge, SamplingParams(temperature=temperature, top_p=1.0, max_new_tokens=max_tokens,
                                                seed=seed), tries)


def pairwise_messages(prompt: str, response_a: str, response_b: str) -> list[dict[str, str]]:
    """The [system, user] messages asking which of two responses answers `prompt` better."""
    user = PAIRWISE_USER.format(prompt=prompt, response_a=response_a, response_b=response_b)
    return [{"role": "system", "content": PAIRWISE_SYSTEM}, {"role": "user", "content": user}]


def parse_verdict(text: str) -> str | None:
    """"A", "B" or "C" (tie) when the output names exactly one distinct verdict, else None.

    Reasoning before a `</think>` is ignored so a judge that weighs both options while thinking is
    judged on its answer only.
    """
    answer = text.rsplit("</think>", 1)[-1]
    found = set(_VERDICT.findall(answer))
    return found.pop() if len(found) == 1 else None


def verdict_key(prompt_id, first: str, second: str) -> str:
    """Resume key: the prompt, the model shown as A, the model shown as B."""
    return f"{prompt_id}\t{first}\t{second}"


@dataclasses.dataclass(frozen=True)
class Battle:
    """One judged comparison; `verdict` None means the judge never gave a parseable answer."""
    prompt_id: str
    model_a: str  # shown first
    model_b: str
    verdict: str | None  # "A" | "B" | "C" | None


def battles_from_records(records: Sequence[dict]) -> list[Battle]:
    return [Battle(str(r["prompt_id"]), r["model_a"], r["model_b"], r.get("verdict")) for r in records]


@dataclasses.dataclass(frozen=True)
class PairJob:
    """One pairwise judgement to make; `meta` is copied into its record."""
    key: str
    prompt: str
    response_a: str
    response_b: str
    meta: dict


def judge_pairwise(jobs: Sequence[PairJob], judge: ChatModel, out_path: str, *, desc: str = "pairwise",
                   temperature: float = 0.0, max_tokens: int = 2048, tries: int = PAIRWISE_TRIES, seed: int = 0,
                   batch_size: int = 32, progress: bool = True,
                   check: Callable[[int, dict], None] | None = None, shard: ProcessShard | None = None,
                   mirror=None) -> dict[str, dict]:
    """Judges every job whose key is not yet in `out_path`, appending one record per job; returns
    {key: record} for everything in the file.

    shard: this process's share when several judge one output (every count-th job into its own part,
    merged by the lead at the end, so every process returns the whole file); mirror: the staging of a
    bucket output (`RecordJob`).

    A job whose output names no single verdict is re-sampled (after the first try at temperature
    ≥ 0.7 with a new seed, since a greedy judge would repeat itself), then recorded with verdict None.
    A job that only ever got errors is not recorded, so the next run retries it; a permanent error
    (`ChatResult.permanent`: a 4xx, a prompt too long for the judge) is not re-asked within the run,
    and is reported apart from transient ones, with its message, not as something a re-run fixes.
    `check(line, record)` may refuse a resumed record (InputError) made under other settings.
    """
    require_generating_judge(judge, "a pairwise [[A]]/[[B]]/[[C]] verdict")
    output = RecordJob(out_path, "key", desc=desc, unit="judgement", progress=progress, shard=shard, mirror=mirror)
    invalid = 0
    verdicts_by_key: dict[str, dict] = {}
    for line, rec in output.records():
        verdicts_by_key[rec["key"]] = rec
        if check is not None:
            check(line, rec)
        if rec.get("judge") != judge.label:  # mixing judges would silently change the metric
            raise InputError(f"holds verdicts from {rec.get('judge')!r}, not {judge.label!r}; "
                             "choose another output", path=out_path, line=line, field="judge")
        invalid += rec.get("verdict") is None
    todo = output.pending(jobs, id_of=lambda job: job.key)

    def ask(job: PairJob, attempt: int) -> ChatRequest:
        # A greedy judge repeats itself: re-samples run at temperature >= 0.7 with the next seed.
        return ChatRequest(messages=pairwise_messages(job.prompt, job.response_a, job.response_b),
                           sampling=SamplingParams(temperature=temperature if attempt == 0 else max(temperature, 0.7),
                                                   top_p=1.0, max_new_tokens=max_tokens, seed=seed + attempt))

    def check(text: str, _job: PairJob) -> tuple[str | None, str | None]:
        verdict = parse_verdict(text)
        return (verdict, None) if verdict is not None else (None, "no single [[A]]/[[B]]/[[C]] verdict")

    for chunk in output.batches(todo, batch_size):
        for asked in ask_until_valid(judge, chunk, ask, check, attempts=tries):
            if not asked.answered:  # errors only: not recorded, so a re-run tries again (if it can pass)
                output.fail(error=asked.error, kind=asked.kind)
                continue
            last = asked.last
            rec = {"key": asked.item.key, **asked.item.meta, "verdict": asked.value, "tries": asked.tries,
                   "judgement": last.text if last.ok else f"<error: {last.error}>", "judge": judge.label}
            output.write(rec)
            verdicts_by_key[asked.item.key] = rec
            invalid += asked.value is None
        output.note(invalid=invalid, errors=output.failed)
    output.close()   # reports failures by kind: permanent (with the server's message) apart from transient
    if output.shard.count > 1:   # after close: every process's verdicts, from the merged output
        return {rec["key"]: rec for _, rec in output.records()}
    return verdicts_by_key


def arena_jobs(prompts: dict, responses: dict[str, dict], extraction: dict[str, str] | None = None
               ) -> list[PairJob]:
    """Every model pair on every prompt they share, in both orders (see `judge_arena`)."""
    jobs = []
    for m1, m2 in itertools.combinations(sorted(responses), 2):
        for pid in sorted(set(responses[m1]) & set(responses[m2]) & set(prompts), key=str):
            for first, second in ((m1, m2), (m2, m1)):
                jobs.append(PairJob(verdict_key(pid, first, second), prompts[pid], responses[first][pid],
                                    responses[second][pid],
                                    {"prompt_id": pid, "model_a": first, "model_b": second}
                                    | ({"answer_extraction": {m: extraction[m] for m in (first, second)}}
                                       if extraction is not None else {})))
    return jobs


# Below this share of a model's prompts with another model's response, `eval arena` refuses to rate
# (unless --allow-partial): the ratings would compare models on different prompts.
MIN_PAIRED_SHARE = 0.95


def pairing(prompts: dict, answered: dict[str, Iterable]) -> dict[str, dict]:
    """Per model: how many prompts of the prompts file it answered, how many of those another model
    answered too, and the ids no other model answered (never judged), in order. `answered`: {model: the
    prompt ids it has a response for}, malformed think/answer ones included (they are counted apart)."""
    out = {}
    for model, answers in answered.items():
        mine = [pid for pid in answers if pid in prompts]
        others = set().union(*(set(r) for other, r in answered.items() if other != model))
        unpaired = sorted((pid for pid in mine if pid not in others), key=str)
        out[model] = {"answered": len(mine), "paired": len(mine) - len(unpaired), "unpaired": unpaired}
    return out


def check_pairing(paired: dict[str, dict], minimum: float = MIN_PAIRED_SHARE) -> None:
    """Raises InputError (one line) when some model has less than `minimum` of its prompts paired."""
    short = [(m, p) for m, p in paired.items() if p["answered"] and p["paired"] < minimum * p["answered"]]
    if not short:
        return
    shared = min(p["paired"] for p in paired.values())
    parts = [f"'{m}' {len(p['unpaired'])} of {p['answered']} ({_ids(p['unpaired'])})" for m, p in short]
    raise InputError(f"--responses: prompts answered by one model only are never judged: {'; '.join(parts)}; "
                     f"below the {minimum:.0%} of each model's prompts an arena needs to compare like with like. "
                     f"Give every model the same prompts, or --allow-partial to judge the shared ones only "
                     f"(as few as {shared} for a model)")


def _ids(ids: Sequence, most: int = 5) -> str:
    shown = ", ".join(map(str, ids[:most]))
    return f"ids {shown}" + (f", ... {len(ids) - most} more" if len(ids) > most else "")


def judge_arena(prompts: dict, responses: dict[str, dict], judge: ChatModel, out_path: str,
                extraction: dict[str, str] | None = None, **kwargs) -> list[dict]:
    """Judges every model pair on every prompt they share, in both orders; returns all records.

    prompts: {prompt_id: prompt text}; responses: {model: {prompt_id: answer}}, already through the
    answer-extraction rule (`jaxwrite.evals.responses`), so only answers are compared; extraction:
    {model: applied mode}, recorded with each verdict, and a resumed verdict made under another mode is
    refused. `kwargs` go to `judge_pairwise` (sampling, tries, seed, batch size, progress, shard, mirror).
    """
    jobs = arena_jobs(prompts, responses, extraction)
    check = _same_extraction(out_path, extraction) if extraction is not None else None
    return list(judge_pairwise(jobs, judge, out_path, desc="arena", check=check, **kwargs).values())


def pairwise_failures(records: Sequence[dict], expected: int) -> dict[str, int]:
    """{reason: judgements} for the judgements of a run that gave no verdict: `records` are the run's
    verdict records, `expected` how many judgements it asked for (the ones not recorded got no answer)."""
    reasons: dict[str, int] = {}
    for rec in records:
        if rec.get("verdict") is None:
            last = rec.get("judgement") or ""
            error = rec.get("error") or (last[len("<error: "):-1] if last.startswith("<error: ") else None)
            reason = (failure_reason(error) if error else
                      f"no single [[A]]/[[B]]/[[C]] verdict (after {rec.get('tries')} tries)")
            reasons[reason] = reasons.get(reason, 0) + 1
    if expected > len(records):
        reasons["no answer from the judge (request errors, not recorded; see the run's messages)"] = \
            expected - len(records)
    return dict(sorted(reasons.items(), key=lambda kv: -kv[1]))


def _same_extraction(out_path: str, extraction: dict[str, str]) -> Callable[[int, dict], None]:
    """Verdicts already in `out_path` must compare text extracted as now; ones written before answer
    extraction existed compared the text after the official '</think>\\n\\n' cut (then the default)."""
    def check(line: int, rec: dict) -> None:
        recorded = rec.get("answer_extraction") or {}
        for model in (rec.get("model_a"), rec.get("model_b")):
            if model in extraction and recorded.get(model, "official_strip") != extraction[model]:
                raise InputError(f"holds verdicts on {model}'s responses under answer extraction "
                                 f"'{recorded.get(model, 'official_strip')}', not '{extraction[model]}'; "
                                 "choose another output", path=out_path, line=line, field="answer_extraction")
    return check


# ----------------------------------------------------------------------------- ratings

def fit_bradley_terry(wins: np.ndarray, prior: float = 0.01, max_iter: int = 100,
                      tol: float = 1e-10) -> np.ndarray:
    """Maximum-likelihood BT strengths θ (natural-log units, mean 0) by damped Newton steps.

    wins: [models, models], wins[i, j] = times i beat j, ties counted as half a win for each side.
    `prior` is the precision of a zero-mean Gaussian prior on θ: it keeps strengths finite when a model
    wins or loses every game, and is negligible otherwise (its gradient sums to zero, so the mean stays 0).
    """
    games = wins + wins.T  # [models, models]
    theta = np.zeros(wins.shape[0])

    def log_posterior(t: np.ndarray) -> float:
        diff = t[:, None] - t[None, :]
        return float(np.sum(wins * -np.logaddexp(0.0, -diff)) - 0.5 * prior * t @ t)

    current = log_posterior(theta)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))  # [models, models] P(i beats j)
        grad = np.sum(wins - games * p, axis=1) - prior * theta
        weight = games * p * (1.0 - p)
        # Negative Hessian: weighted graph Laplacian + prior; positive definite when prior > 0.
        neg_hess = np.diag(weight.sum(axis=1)) - weight + prior * np.eye(len(theta))
        step = np.linalg.lstsq(neg_hess, grad, rcond=None)[0]
        scale = 1.0
        while scale > 1e-6:
            candidate = theta + scale * step
            value = log_posterior(candidate)
            if value >= current - 1e-12:
                break
            scale *= 0.5
        theta, current = candidate, value
        if np.max(np.abs(scale * step)) < tol:
            break
    return theta - theta.mean()


def win_matrix(battles: Sequence[Battle], models: Sequence[str]) -> np.ndarray:
    """[models, models] wins of row over column; ties add 0.5 to both; invalid verdicts skipped."""
    index = {m: i for i, m in enumerate(models)}
    wins = np.zeros((len(models), len(models)))
    for b in battles:
        a, c = index[b.model_a], index[b.model_b]
        if b.verdict == "A":
            wins[a, c] += 1.0
        elif b.verdict == "B":
            wins[c, a] += 1.0
        elif b.verdict == "C":
            wins[a, c] += 0.5
            wins[c, a] += 0.5
    return wins


def to_elo(theta: np.ndarray, models: Sequence[str], anchor_model: str | None = None) -> np.ndarray:
    """Elo ratings: mean (or `anchor_model`) at ELO_ANCHOR."""
    shift = theta[list(models).index(anchor_model)] if anchor_model else theta.mean()
    return ELO_ANCHOR + ELO_SCALE * (theta - shift)


NO_VALID_BATTLES = "no valid battles"


@dataclasses.dataclass
class ArenaResult:
    """Ratings of the models with at least one valid verdict; a model without one has elo and ci None
    (it was never compared: a rating of 1000 would claim it is average)."""
    models: list[str]
    elo: dict[str, float | None]
    ci: dict[str, tuple[float, float] | None]  # bootstrap percentile interval per model
    win_rate: dict[str, dict[str, float | None]]  # row's score vs column (ties = half); None = never met
    n_battles: int  # valid verdicts used in the fit
    n_invalid: int
    position: dict[str, float | int | None]
    anchor: str | None = None  # the model rated ELO_ANCHOR; None: the mean of the rated models

    @property
    def status(self) -> str:
        return "ok" if self.n_battles else NO_VALID_BATTLES

    def summary(self) -> dict:
        return {"status": self.status, "prompt": PROMPT_LABEL, "elo_scale": "anchor + 400/ln10 * theta",
                "anchor": self.anchor or "mean of the rated models",
                "elo": self.elo, "ci95": {m: list(v) if v else None for m, v in self.ci.items()},
                "win_rate": self.win_rate, "n_battles": self.n_battles, "n_invalid": self.n_invalid,
                "position_bias": self.position}


def position_bias(battles: Sequence[Battle]) -> dict[str, float | int | None]:
    """How often each position wins, and whether the two orders of a pair agree; a share with nothing
    to count is None.

    Consistent = the same model wins (or a tie) in both orders of one (prompt, pair); only pairs with
    two valid verdicts count.
    """
    valid = [b for b in battles if b.verdict is not None]
    n = len(valid)
    counts = {v: sum(b.verdict == v for b in valid) for v in "ABC"}
    by_pair: dict[tuple, dict[str, str]] = {}
    for b in valid:
        winner = {"A": b.model_a, "B": b.model_b, "C": "tie"}[b.verdict]
        by_pair.setdefault((b.prompt_id, frozenset((b.model_a, b.model_b))), {})[b.model_a] = winner
    both = [w for w in by_pair.values() if len(w) == 2]
    consistent = sum(len(set(w.values())) == 1 for w in both)
    return {"n_valid": n, "first_wins": counts["A"] / n if n else None,
            "second_wins": counts["B"] / n if n else None,
            "ties": counts["C"] / n if n else None,
            "n_pairs_both_orders": len(both),
            "consistency": consistent / len(both) if both else None}


def rate_arena(battles: Sequence[Battle], *, models: Sequence[str] | None = None,
               anchor_model: str | None = None, bootstrap: int = 1000, seed: int = 0,
               prior: float = 0.01) -> ArenaResult:
    """BT/Elo ratings, bootstrap CIs over prompts (seeded), win rates and position-bias statistics.

    Only models with a valid verdict are rated (an `anchor_model` without one leaves the mean at
    ELO_ANCHOR); with no valid verdict at all nothing is rated and the status says "no valid battles".
    `models` (default: those in `battles`) names every model in the arena, judged or not.
    """
    models = sorted(set(models or ()) | {b.model_a for b in battles} | {b.model_b for b in battles})
    valid = [b for b in battles if b.verdict is not None]
    wins = win_matrix(valid, models)
    games = wins + wins.T
    rates = {m: {o: (float(wins[i, j] / games[i, j]) if games[i, j] else None)
                 for j, o in enumerate(models) if j != i} for i, m in enumerate(models)}
    rated = sorted({b.model_a for b in valid} | {b.model_b for b in valid})
    anchor = anchor_model if anchor_model in rated else None
    elo, ci = _rate(valid, rated, anchor, bootstrap, seed, prior)
    return ArenaResult(models=models, elo={m: elo.get(m) for m in models}, ci={m: ci.get(m) for m in models},
                       win_rate=rates, n_battles=len(valid), n_invalid=len(battles) - len(valid),
                       position=position_bias(battles), anchor=anchor)


def _rate(valid: Sequence[Battle], models: list[str], anchor_model: str | None, bootstrap: int, seed: int,
          prior: float) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """({model: Elo}, {model: 95% bootstrap interval}) of `models`, which all have a valid verdict."""
    if not models:
        return {}, {}
    elo = to_elo(fit_bradley_terry(win_matrix(valid, models), prior), models, anchor_model)
    by_prompt: dict[str, list[Battle]] = {}
    for b in valid:
        by_prompt.setdefault(b.prompt_id, []).append(b)
    prompt_ids = sorted(by_prompt)
    # [prompts, models, models] per-prompt win counts: a bootstrap sample is a weighted sum of these.
    per_prompt = np.stack([win_matrix(by_prompt[p], models) for p in prompt_ids])
    rng = np.random.default_rng(seed)
    samples = np.zeros((bootstrap, len(models)))  # [bootstrap, models]
    for k in range(bootstrap):
        counts = np.bincount(rng.integers(0, len(prompt_ids), size=len(prompt_ids)),
                             minlength=len(prompt_ids))  # [prompts] times each prompt was drawn
        sample_wins = np.tensordot(counts, per_prompt, axes=1)
        samples[k] = to_elo(fit_bradley_terry(sample_wins, prior), models, anchor_model)
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=0) if bootstrap else (elo, elo)
    return ({m: float(e) for m, e in zip(models, elo)},
            {m: (float(lo[i]), float(hi[i])) for i, m in enumerate(models)})


def plot_elo(result: ArenaResult, path: str) -> str | None:
    """Horizontal Elo chart with bootstrap 95% intervals of the rated models, best on top; None (no
    chart) when nothing was rated."""
    from jaxwrite.common.plots import interval_chart
    rated = [m for m in result.models if result.elo[m] is not None]
    if not rated:
        return None
    return interval_chart({m: result.elo[m] for m in rated}, {m: result.ci[m] for m in rated}, path,
                          "Pairwise arena (reimplementation)",
                          "Elo (Bradley–Terry, 95% bootstrap CI over prompts)", reference=ELO_ANCHOR)
