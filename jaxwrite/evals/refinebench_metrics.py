"""RefineBench metrics per turn: Acc_t and Pass_t, overall and per field / exam type, and their curves.

Acc_t = 100 × satisfied items / total items over the problems (micro, as RefineBench's evaluation does);
`acc_macro` (mean over problems of each problem's satisfied fraction, the paper's "mean fraction") is
reported beside it as an extension. Pass_t = 100 × mean over problems of [every item satisfied].

Carry-forward: a problem that stopped before turn t (declared done, or every item met) keeps its last
judged state for every later turn, so each turn's figures cover the same problems. A problem whose
records end early without a stop reason (a failed model call; re-run to continue it) is carried forward
too, and counted in `incomplete` so the report says so.
"""
from __future__ import annotations

from typing import Sequence

from jaxwrite.evals.refinebench_data import Problem


def _states(records: Sequence[dict], turns: int) -> dict[str, list[dict]]:
    """{index: [record holding at turn 1..T]} with carry-forward after the last record."""
    by_problem: dict[str, dict[int, dict]] = {}
    for rec in records:
        by_problem.setdefault(rec["index"], {})[rec["turn"]] = rec
    states = {}
    for index, by_turn in by_problem.items():
        if 1 not in by_turn:
            continue
        held, row = by_turn[1], []
        for t in range(1, turns + 1):
            held = by_turn.get(t, held)
            row.append(held)
        states[index] = row
    return states


def _curve(rows: list[list[dict]], turns: int) -> dict[str, list[float]]:
    acc, acc_macro, pass_rate = [], [], []
    for t in range(turns):
        sat = [r[t]["satisfied"] for r in rows]
        tot = [r[t]["total"] for r in rows]
        acc.append(100.0 * sum(sat) / sum(tot))
        acc_macro.append(100.0 * sum(s / n for s, n in zip(sat, tot)) / len(rows))
        pass_rate.append(100.0 * sum(s == n for s, n in zip(sat, tot)) / len(rows))
    return {"n": len(rows), "acc": acc, "pass": pass_rate, "acc_macro": acc_macro}


def refinebench_metrics(records: Sequence[dict], problems: Sequence[Problem], turns: int) -> dict:
    """Per-turn curves (lists indexed by turn − 1) overall, by field and by exam type, plus counts."""
    states = _states(records, turns)
    known = {p.index: p for p in problems}
    scored = [known[i] for i in sorted(states) if i in known]
    if not scored:
        return {"n_problems": 0, "n_missing": len(problems), "turns": turns}
    groups: dict[str, dict[str, list]] = {"field": {}, "exam_type": {}}
    for p in scored:
        groups["field"].setdefault(p.field, []).append(states[p.index])
        groups["exam_type"].setdefault(p.exam_type, []).append(states[p.index])
    last = [states[p.index][-1] for p in scored]
    stops = {}
    for rec in last:
        stops[rec["stop"] or "incomplete"] = stops.get(rec["stop"] or "incomplete", 0) + 1
    return {
        "turns": turns,
        "n_problems": len(scored),
        "n_missing": len(problems) - len(scored),  # never reached turn 1
        "overall": _curve([states[p.index] for p in scored], turns),
        "by_field": {k: _curve(v, turns) for k, v in sorted(groups["field"].items())},
        "by_exam_type": {k: _curve(v, turns) for k, v in sorted(groups["exam_type"].items())},
        "stop_reasons": dict(sorted(stops.items())),
        "incomplete": stops.get("incomplete", 0),
        "mean_turns_used": sum(r["turn"] for r in last) / len(last),
        "judge_unparsed_items": sum(r["unparsed"] for r in records if r["index"] in known),
        "judge_calls_unparsed": sum(r["unparsed"] == r["total"] for r in records
                                    if r["index"] in known and not r["done"]),
    }


def plot_curves(metrics: dict, path: str, title: str = "RefineBench") -> str:
    """Acc_t and Pass_t against turn t (overall), one PNG."""
    from jaxwrite.common.plots import line_chart
    turns = list(range(1, metrics["turns"] + 1))
    series = {"Acc_t": (turns, metrics["overall"]["acc"]), "Pass_t": (turns, metrics["overall"]["pass"])}
    return line_chart(series, path, f"{title} (n={metrics['n_problems']}; reimplementation)", xlabel="turn t",
                      ylabel="%", size=(6, 4), ylim=(0, 100), xticks=turns, dpi=120)
