"""Raw vs length- and style-controlled arena ratings on a synthetic judge that rewards length and markdown
(issue 27 §3): what each rating reports when the true quality of every model is known.

Four models answer `--prompts` prompts (word counts drawn log-normally around each model's median; the
answers with markdown hold 0-3 headers, 0-5 list items and 0-3 bold spans, drawn apart):

| model    | true quality (log-odds) | median words | answers with markdown |
|----------|-------------------------|--------------|-----------------------|
| terse    | 0                       | 150          | 10 %                  |
| verbose  | 0                       | 400          | 10 %                  |
| better   | +1.0                    | 150          | 10 %                  |
| markdown | 0                       | 150          | 80 %                  |

Every pair is judged in both orders by a synthetic judge: P(A wins) = sigmoid(q_A - q_B + `--length-weight`
x log(words A / words B) + `--style-weight` x (headers, list items and bold of A vs B, normalised
differences summed)); no ties. With the default length weight it picks the longer of two equal answers ~90 %
of the time at the verbose/terse length gap. The ratings are `jaxwrite.evals.arena.rate_arena` (raw) and
`jaxwrite.evals.arena_report.controlled_arena` (length- and style-controlled), anchored at terse = 1000 with
`--bootstrap` intervals over prompts; "true" is the Elo the qualities alone give.

    python benchmarks/arena_length_control.py [--prompts 200] [--bootstrap 200] [--seed 0] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np

MODELS = {"terse": (0.0, 150, 0.1), "verbose": (0.0, 400, 0.1), "better": (1.0, 150, 0.1),
          "markdown": (0.0, 150, 0.8)}   # (true quality, median words, share of answers with markdown)


def _answer(rng, median: int, markdown: float) -> str:
    words = max(5, int(rng.lognormal(math.log(median), 0.4)))
    body = " ".join(["word"] * words)
    if rng.random() >= markdown:
        return body
    # Headers, list items and bold spans drawn apart, so the three covariates are not one.
    parts = [f"## Part {i}" for i in range(rng.integers(0, 4))]
    parts += [f"- item {i}" for i in range(rng.integers(0, 6))]
    parts += [f"**key {i}** said" for i in range(rng.integers(0, 4))]
    return "\n\n".join(parts + [body])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--length-weight", type=float, default=3.0)
    parser.add_argument("--style-weight", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    from jaxwrite.evals.arena import ELO_ANCHOR, ELO_SCALE, Battle, rate_arena
    from jaxwrite.evals.arena_control import STYLE, log_length_ratio, pair_covariates, style_features
    from jaxwrite.evals.arena_report import controlled_arena

    rng = np.random.default_rng(args.seed)
    answers = {m: {str(p): _answer(rng, median, md) for p in range(args.prompts)}
               for m, (_, median, md) in MODELS.items()}
    features = {m: {p: style_features(t) for p, t in by.items()} for m, by in answers.items()}
    names = sorted(MODELS)
    battles, longer_won, decided = [], 0, 0
    for p in map(str, range(args.prompts)):
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for first, second in ((a, b), (b, a)):
                    fa, fb = features[first][p], features[second][p]
                    style = sum(pair_covariates(fa, fb, STYLE)[1:])
                    ratio = log_length_ratio(fa, fb)
                    logit = (MODELS[first][0] - MODELS[second][0] + args.length_weight * ratio
                             + args.style_weight * style)
                    first_wins = rng.random() < 1 / (1 + math.exp(-logit))
                    battles.append(Battle(p, first, second, "A" if first_wins else "B"))
                    if {first, second} == {"terse", "verbose"}:
                        decided += 1
                        longer_won += first_wins == (ratio > 0)
    raw = rate_arena(battles, anchor_model="terse", bootstrap=args.bootstrap, seed=args.seed)
    control = controlled_arena(battles, answers, anchor_model="terse", bootstrap=args.bootstrap, seed=args.seed)
    true = {m: ELO_ANCHOR + ELO_SCALE * (q - MODELS["terse"][0]) for m, (q, _, _) in MODELS.items()}
    rows = []
    for m in sorted(names, key=lambda m: -raw.elo[m]):
        rows.append({"model": m, "true": true[m], "raw": raw.elo[m], "raw_ci": raw.ci[m],
                     "length_controlled": control.length.elo[m], "lc_ci": control.length.ci[m],
                     "style_controlled": control.style.elo[m], "sc_ci": control.style.ci[m]})
    print(f"{len(battles)} verdicts; the longer of verbose/terse won {longer_won / decided:.1%}; overall longer "
          f"answer won {control.bias['longer_wins']:.1%}")
    print("| model | true Elo | raw Elo (95% CI) | length-controlled (95% CI) | style-controlled (95% CI) |")
    print("|---|---|---|---|---|")
    ci = lambda c: f"{c[0]:.0f}–{c[1]:.0f}"  # noqa: E731
    for r in rows:
        print(f"| {r['model']} | {r['true']:.0f} | {r['raw']:.0f} ({ci(r['raw_ci'])}) | {r['length_controlled']:.0f} "
              f"({ci(r['lc_ci'])}) | {r['style_controlled']:.0f} ({ci(r['sc_ci'])}) |")
    coefs = {r.name: {f: round(c["per_unit"], 3) for f, c in r.coefficients.items()}
             for r in (control.length, control.style)}
    print("coefficients per unit (log-odds):", json.dumps(coefs))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "battles": len(battles), "verbose_terse_longer_won": longer_won / decided,
                       "ratings": rows, "coefficients": coefs, "length_bias": control.bias}, f, indent=1)


if __name__ == "__main__":
    main()
