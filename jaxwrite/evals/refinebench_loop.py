"""The RefineBench multi-turn loop: answer, checklist-judge, feed back, refine; up to T turns.

Modes: `self` (no feedback; the model may declare it is done), `guided` (every unmet item fed back),
`partial` (only unmet items from a revealed subset of ⌊N × ratio⌋ items; the subset is drawn once per
problem from a generator seeded by (seed, crc32(index)), so it is the same on every turn and every
re-run). Guided and partial problems stop once every item is met: nothing is left to feed back.

Each (problem, turn) becomes one jsonl record appended as soon as it is judged; a re-run rebuilds each
conversation from its records and continues. A turn whose model call fails after `tries` attempts is
not written (the next run retries it) and the problem sits out the rest of this run. A checklist judge
answer that does not parse is re-sampled; after `tries` attempts its items count as "No" and are
counted in `unparsed`. Prompts: see refinebench_prompts (reimplementation; official prompts unavailable).

Several processes (`shard`) each run every count-th problem, all its turns, into their own part file; the
lead merges the parts at the end and every process returns the records of every problem.
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from typing import Sequence

import numpy as np

from jaxwrite.chat import ChatModel, ChatRequest, ChatResult, SamplingParams, ask_until_valid
from jaxwrite.common import InputError, RecordJob
from jaxwrite.common.record_job import ProcessShard
from jaxwrite.evals.refinebench_data import Problem, problem_prompt
from jaxwrite.evals.refinebench_prompts import (answer_text, checklist_messages, declares_done,
                                                parse_checklist, refine_message)

MODES = ("self", "guided", "partial")


@dataclasses.dataclass(frozen=True)
class RefineConfig:
    mode: str = "guided"
    turns: int = 5
    partial_ratio: float = 0.5
    seed: int = 0
    tries: int = 3  # model calls per turn, and judge samples per turn, before giving up
    batch_size: int = 16
    # Each try's seed is `seed` + try; a judge re-sample runs at temperature >= 0.7.
    model_sampling: SamplingParams = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=8192)
    judge_sampling: SamplingParams = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=2048)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown refinement mode {self.mode!r}; expected one of {MODES}")
        if self.turns < 1 or not 0.0 <= self.partial_ratio <= 1.0:
            raise ValueError("expected turns >= 1 and 0 <= partial_ratio <= 1")


def revealed_items(problem: Problem, ratio: float, seed: int) -> list[int]:
    """The ⌊N × ratio⌋ checklist positions partial feedback may mention, fixed per problem."""
    n = len(problem.checklist)
    rng = np.random.default_rng([seed, zlib.crc32(problem.index.encode())])
    return sorted(int(i) for i in rng.choice(n, size=math.floor(n * ratio), replace=False))


def _feedback(cfg: RefineConfig, problem: Problem, marks: Sequence[bool], revealed: list[int]) -> str:
    shown = range(len(marks)) if cfg.mode == "guided" else revealed
    return refine_message(cfg.mode, [problem.checklist[i] for i in shown if not marks[i]])


def _history(cfg: RefineConfig, problem: Problem, records: list[dict], revealed: list[int]) -> list[dict]:
    """The conversation before the next turn, rebuilt from this problem's records."""
    messages = [{"role": "user", "content": problem_prompt(problem)}]
    for rec in records:
        messages.append({"role": "assistant", "content": rec["response"]})
        messages.append({"role": "user", "content": _feedback(cfg, problem, rec["marks"], revealed)})
    return messages


def _stop_reason(cfg: RefineConfig, turn: int, done: bool, marks: Sequence[bool]) -> str | None:
    if done:
        return "done"
    if cfg.mode != "self" and all(marks):
        return "all_satisfied"
    return "max_turns" if turn == cfg.turns else None


def run_refinebench(problems: Sequence[Problem], model: ChatModel, judge: ChatModel, out_path: str,
                    cfg: RefineConfig = RefineConfig(), progress: bool = True,
                    shard: ProcessShard | None = None, mirror=None) -> list[dict]:
    """Runs (or resumes) the loop over `problems` (this process's share of them: `shard`); returns every
    record in `out_path` for them. mirror: the staging of a bucket output (`RecordJob`)."""
    shard = shard or ProcessShard()
    job = RecordJob(out_path, "key", desc=f"refinebench[{cfg.mode}]", unit="turn", progress=progress,
                    shard=shard, mirror=mirror)
    history = _histories(job, problems, cfg, model, judge)
    mine = shard.share(problems)
    revealed = {p.index: revealed_items(p, cfg.partial_ratio, cfg.seed) if cfg.mode == "partial" else []
                for p in mine}
    # "max_turns" from an earlier, shorter run is not final: a run with more turns continues it.
    finished = lambda recs: bool(recs) and (recs[-1]["stop"] in ("done", "all_satisfied")
                                            or recs[-1]["turn"] >= cfg.turns)
    job.open_progress(len(mine) * cfg.turns,
                      sum(cfg.turns if finished(history[p.index]) else len(history[p.index]) for p in mine))
    failed: set[str] = set()
    for turn in range(1, cfg.turns + 1):
        active = [p for p in mine if len(history[p.index]) == turn - 1
                  and not finished(history[p.index]) and p.index not in failed]
        for chunk in job.batches(active, cfg.batch_size):
            texts, errors = _generate(model, cfg, [_history(cfg, p, history[p.index], revealed[p.index])
                                                   for p in chunk])
            to_judge = [(p, t) for p, t in zip(chunk, texts)
                        if t is not None and not (cfg.mode == "self" and turn > 1 and declares_done(t))]
            judged = _judge(judge, cfg, to_judge)
            for p, text, error in zip(chunk, texts, errors):
                if text is None:
                    failed.add(p.index)
                    job.fail(advance=0, error=error.error, kind=error.failure_kind)
                    continue
                prior = history[p.index][-1] if history[p.index] else None
                done = prior is not None and cfg.mode == "self" and declares_done(text)
                marks, unparsed, tries = (prior["marks"], 0, 0) if done else judged[p.index]
                rec = {"key": f"{p.index}#{turn}", "index": p.index, "turn": turn, "mode": cfg.mode,
                       "response": text, "done": done, "marks": marks, "unparsed": unparsed,
                       "judge_tries": tries, "satisfied": sum(marks), "total": len(marks),
                       "revealed": revealed[p.index], "stop": _stop_reason(cfg, turn, done, marks),
                       "model": model.label, "judge": judge.label}
                job.write(rec, advance=cfg.turns - turn + 1 if rec["stop"] else 1)
                history[p.index].append(rec)
            job.note(model_failures=len(failed))
    job.close()   # model errors by kind: permanent (with the server's message) apart from transient
    if shard.count > 1:   # the other processes' problems, from the merged output
        history = _histories(job, problems, cfg, model, judge)
    return [rec for p in problems for rec in history[p.index]]


def _histories(job: RecordJob, problems: Sequence[Problem], cfg: RefineConfig, model: ChatModel,
               judge: ChatModel) -> dict[str, list[dict]]:
    """{problem index: its records in turn order} from what the output holds."""
    history: dict[str, list[dict]] = {p.index: [] for p in problems}
    for lineno, rec in job.records():
        if rec.get("index") not in history:
            continue
        # Continuing another setting's conversations would silently mix two experiments.
        for field, ours in (("mode", cfg.mode), ("model", model.label), ("judge", judge.label)):
            if rec.get(field) != ours:
                raise InputError(f"holds a record with {field} {rec.get(field)!r} but this run uses "
                                 f"{ours!r}; choose another output", path=job.output, line=lineno,
                                 field=field)
        history[rec["index"]].append(rec)
    for recs in history.values():
        recs.sort(key=lambda r: r["turn"])
    return history


def _generate(model: ChatModel, cfg: RefineConfig, conversations: list[list[dict]]
              ) -> tuple[list[str | None], list[ChatResult | None]]:
    """One answer per conversation, retrying failed calls (not permanent errors, which fail alike
    again); None where every try failed, with its last failed result."""
    def ask(conversation: list[dict], attempt: int) -> ChatRequest:
        return ChatRequest(messages=conversation,
                           sampling=dataclasses.replace(cfg.model_sampling, seed=cfg.seed + attempt))

    asked = ask_until_valid(model, conversations, ask, lambda text, _: (text, None), attempts=cfg.tries)
    return [a.value for a in asked], [None if a.accepted else a.last for a in asked]


def _judge(judge: ChatModel, cfg: RefineConfig, items: list[tuple[Problem, str]]) -> dict[str, tuple]:
    """{index: (marks, unparsed item count, judge tries)}; unparseable items count as not met."""
    temperature = cfg.judge_sampling.temperature

    def ask(item: tuple[Problem, str], attempt: int) -> ChatRequest:
        p, text = item
        # A greedy judge repeats itself: re-samples run at temperature >= 0.7 with the next seed.
        return ChatRequest(messages=checklist_messages(problem_prompt(p), p.reference_answer, answer_text(text),
                                                       p.checklist),
                           sampling=dataclasses.replace(cfg.judge_sampling, seed=cfg.seed + attempt,
                                                        temperature=temperature if attempt == 0
                                                        else max(temperature, 0.7)))

    def check(text: str, item: tuple[Problem, str]) -> tuple[list | None, str | None]:
        marks = parse_checklist(text, len(item[0].checklist))
        return (marks, None) if marks is not None else (None, "unparseable checklist answer")

    out = {}
    for a in ask_until_valid(judge, items, ask, check, attempts=cfg.tries):
        p = a.item[0]
        got = a.value or [None] * len(p.checklist)
        out[p.index] = ([m is True for m in got], sum(m is None for m in got), a.tries)
    return out
