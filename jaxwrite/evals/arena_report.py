"""The arena report's controlled part: raw, length-controlled and style-controlled Elo side by side, the
coefficients the judge pays for length and markdown, and its length bias as a figure (`arena_control`).

Which figure answers which question:
- raw Elo: which model does this judge prefer, as it judged them?
- length-controlled Elo: which would it prefer if both answers were equally long?
- style-controlled Elo: ... equally long and equally formatted (headers, list items, bold)?
- the length-bias figure: how much does this judge reward length at all (A's win rate against the
  log length ratio of the pair; a judge blind to length stays on the 0.5 line)?
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Mapping, Sequence

from jaxwrite.evals.arena import ArenaResult, Battle
from jaxwrite.evals.arena_control import (LENGTH, STYLE, ControlledRating, length_bias, rate_controlled,
                                          style_features)
from jaxwrite.evals.report import Section, markdown_table

QUESTIONS = ("- Raw Elo: which model this judge prefers, as it judged them.\n"
             "- Length-controlled Elo: which it would prefer if both answers were equally long (the log length "
             "ratio of each pair is a covariate of the Bradley-Terry fit, AlpacaEval-LC style).\n"
             "- Style-controlled Elo: ... equally long and equally formatted (length plus the normalised "
             "differences in markdown headers, list items and bold spans, Arena-Hard style).\n"
             "- Length bias (figure): how much this judge rewards length at all; a judge blind to length "
             "stays on the 0.5 line.")


@dataclasses.dataclass
class ControlledArena:
    length: ControlledRating
    style: ControlledRating
    bias: dict

    def summary(self) -> dict:
        return {"length_controlled": self.length.summary(), "style_controlled": self.style.summary(),
                "length_bias": self.bias}

    def warnings(self) -> list[str]:
        """One line per controlled fit that could not be made (the raw Elo stands)."""
        return [f"arena: {r.name} rating {r.status}; the raw Elo is reported"
                for r in (self.length, self.style) if r.status != "ok"]


def controlled_arena(battles: Sequence[Battle], answers: Mapping[str, Mapping[str, str]], *,
                     anchor_model: str | None = None, bootstrap: int = 1000, seed: int = 0) -> ControlledArena:
    """Both controlled fits and the length bias of `battles`; `answers`: {model: {prompt id: the text
    the judge compared}}."""
    # Battles name prompts by str(id) (`battles_from_records`), whatever type the prompts file gave.
    features_of = {m: {str(pid): style_features(text) for pid, text in by_prompt.items()}
                   for m, by_prompt in answers.items()}
    kwargs = {"anchor_model": anchor_model, "bootstrap": bootstrap, "seed": seed}
    lc = rate_controlled(battles, features_of, "length-controlled", LENGTH, **kwargs)
    sc = rate_controlled(battles, features_of, "style-controlled", STYLE, **kwargs)
    slope = lc.coefficients.get("length", {}).get("per_unit")
    return ControlledArena(lc, sc, length_bias(battles, features_of, slope))


def plot_length_bias(bias: Mapping, path: str | os.PathLike) -> str | None:
    """A's win rate per log-length-ratio bin, with the length-controlled fit's curve for equal models
    (None when no bin holds a verdict)."""
    from jaxwrite.common.plots import binned_rate_chart
    bins = [b for b in bias["bins"] if b["battles"]]
    if not bins:
        return None
    centres = [_centre(b) for b in bins]
    curve = None
    if bias.get("log_ratio_coefficient") is not None:
        xs = [min(centres) + (max(centres) - min(centres)) * i / 50 for i in range(51)]
        curve = (xs, [1 / (1 + math.exp(-bias["log_ratio_coefficient"] * x)) for x in xs])
    return binned_rate_chart(centres, [b["a_win_rate"] for b in bins], [b["battles"] for b in bins], path,
                             "Judge length bias", "log(words of A / words of B)", "A's win rate (ties = 1/2)",
                             curve, "length-controlled fit, equal models")


def _centre(b: Mapping) -> float:
    """A bin's middle; an open end bin is drawn a quarter unit past its closed edge."""
    if b["low"] is None:
        return b["high"] - 0.25
    if b["high"] is None:
        return b["low"] + 0.25
    return (b["low"] + b["high"]) / 2


def control_sections(result: ArenaResult, control: ControlledArena, figure: str | None) -> list[Section]:
    """"Length and style control" (the three ratings, what each answers, the coefficients) and "Length
    bias of the judge" (the figure and its bins)."""
    order = sorted((m for m in result.models if result.elo[m] is not None), key=lambda m: -result.elo[m])
    rows = []
    for m in order:
        row = [m, result.elo[m], _interval(result.ci[m])]
        for r in (control.length, control.style):
            row += [r.elo.get(m), _interval(r.ci.get(m))] if r.status == "ok" else [None, "-"]
        rows.append(row)
    table = markdown_table(["model", "raw Elo", "raw 95% CI", "length-controlled", "95% CI", "style-controlled",
                            "95% CI"], rows, digits=1)
    notes = []
    for r in (control.length, control.style):
        if r.status != "ok":
            notes.append(f"- {r.name}: {r.status}")
            continue
        coefs = "; ".join(f"{f} {c['per_sd']:+.3f} per SD (SD {c['sd']:.3f})" for f, c in r.coefficients.items())
        left = f"; left out (no variation): {', '.join(r.left_out)}" if r.left_out else ""
        notes.append(f"- {r.name} coefficients (log-odds that A wins): {coefs}{left}")
    text = QUESTIONS + "\n\n" + table + "\n\n" + "\n".join(notes)
    bias = control.bias
    longer = "-" if bias["longer_wins"] is None else f"{100 * bias['longer_wins']:.1f} %"
    bins = markdown_table(["log length ratio", "verdicts", "A's win rate"],
                          [[_bin_label(b), b["battles"], b["a_win_rate"]] for b in bias["bins"]], digits=3)
    bias_text = (f"The longer answer won {longer} of {bias['decided_battles']} decided verdicts (no tie, lengths "
                 f"differ). {bias['note']}.\n\n" + bins)
    return [Section("Length and style control", text),
            Section("Length bias of the judge", bias_text, (figure,) if figure else ())]


def _interval(ci) -> str:
    return "-" if not ci else f"{ci[0]:.1f} to {ci[1]:.1f}"


def _bin_label(b: Mapping) -> str:
    lo = "-inf" if b["low"] is None else f"{b['low']:+.2f}"
    hi = "+inf" if b["high"] is None else f"{b['high']:+.2f}"
    return f"[{lo}, {hi})"
