"""`jaxwrite eval arena`: pairwise judging of several response files, Bradley–Terry/Elo report.

Several processes started the same way (a pod slice, srun, mpirun) judge every n-th judgement each into a
part file; the first merges them, rates and writes the report. The output folder may be in a bucket
(gs://...): it is staged locally and pushed as verdicts come (`jaxwrite.common.remote.StagedOutput`)."""
from __future__ import annotations

import json
import os
import sys

from jaxwrite.cli._eval_writingbench import add_answer_extraction_args
from jaxwrite.cli._model_args import add_model_args, check_model_args, model_from_args
from jaxwrite.common import InputError, read_jsonl


def register(benchmarks) -> None:
    parser = benchmarks.add_parser(
        "arena", help="pairwise arena: every model pair judged in both orders, Bradley-Terry Elo")
    parser.add_argument("--responses", nargs="+", required=True, metavar="[NAME=]FILE",
                        help='jsonl files of {"<id-key>": ..., "response": "..."}; model name = NAME or file stem')
    parser.add_argument("--prompts", required=True, help='jsonl of {"<id-key>": ..., "prompt": "..."}')
    parser.add_argument("--id-key", default="id", help="prompt id field in both files (default: id)")
    add_model_args(parser, "judge", "the pairwise judge", required=True, modes=("generate",),
                   verdict="a pairwise [[A]]/[[B]]/[[C]] verdict")
    parser.add_argument("--output", required=True, help="output directory (verdicts.jsonl, report); gs:// works")
    parser.add_argument("--allow-partial", action="store_true",
                        help="rate even when a model has under 95%% of its prompts answered by another model "
                             "(unpaired prompts are never judged; they are listed in the report)")
    parser.add_argument("--anchor", help="model rated 1000 (default: the mean rating is 1000)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judge-temperature", type=float, default=0.0)
    parser.add_argument("--judge-max-tokens", type=int, default=2048)
    add_answer_extraction_args(parser, "; decided per response file")
    parser.set_defaults(func=run)


def _read_prompts(path: str, id_key: str) -> dict:
    prompts = {}
    for line, rec in read_jsonl(path, required=(id_key, "prompt")):
        if not isinstance(rec["prompt"], str):
            raise InputError("expected a string", path=path, line=line, field="prompt")
        if rec[id_key] in prompts:
            raise InputError("duplicate prompt id", path=path, line=line, field=id_key)
        prompts[rec[id_key]] = rec["prompt"]
    return prompts


def _read_responses(spec: str, id_key: str, mode: str):
    """(model name, the file's ResponseAnswers): only answers are compared, by the scorers' one rule."""
    from jaxwrite.evals.responses import read_answers

    name, path = spec.split("=", 1) if "=" in spec and not os.path.exists(spec) else (None, spec)
    name = name or os.path.splitext(os.path.basename(path))[0]
    return name, read_answers(path, mode, key=id_key, repeated="duplicate prompt id")


def run(args) -> int:
    from jaxwrite.common.remote import StagedOutput
    from jaxwrite.parallel import process_shard

    check_model_args(args, "judge")   # a bad judge option fails before the files are read
    prompts = _read_prompts(args.prompts, args.id_key)
    mode = args.answer_extraction
    responses: dict[str, dict] = {}
    extraction: dict[str, dict] = {}
    answered: dict[str, list] = {}   # prompt ids with a response, malformed ones included (pairing)
    for spec in args.responses:
        name, answers = _read_responses(spec, args.id_key, mode)
        if name in responses:
            raise InputError(f"model name '{name}' given twice; name files as NAME=FILE", path=spec)
        unknown = set(answers.answers) - set(prompts)
        if unknown:
            print(f"arena: {name}: ignoring {len(unknown)} responses whose id is not in {args.prompts}",
                  file=sys.stderr)
        # A malformed think/answer response has no answer to compare: its prompt is not shared.
        known = [pid for pid in answers.answers if pid in prompts]
        answered[name] = known
        responses[name] = answers.scorable(known)
        extraction[name] = answers.summary(known)
        if extraction[name]["malformed"]:
            print(f"arena: {name}: {extraction[name]['malformed']} malformed think/answer responses are left "
                  "out (see answer_extraction in summary.json)", file=sys.stderr)
    if len(responses) < 2:
        raise InputError("--responses: expected at least two response files")
    if args.anchor is not None and args.anchor not in responses:
        raise InputError(f"--anchor: expected one of {sorted(responses)}")
    from jaxwrite.evals.arena import MIN_PAIRED_SHARE, arena_jobs, check_pairing, pairing

    jobs = arena_jobs(prompts, responses)   # refused before a judge model loads or the bucket is read
    if not jobs:
        raise InputError("no prompt id is shared by two response files and the prompts file")
    paired = pairing(prompts, answered)
    if not args.allow_partial:
        check_pairing(paired)
    for name, p in paired.items():
        if p["unpaired"]:
            print(f"arena: {name}: {len(p['unpaired'])} of {p['answered']} prompts have no other model's response "
                  f"and are not judged (listed in summary.json, pairing)", file=sys.stderr)
    paired = {"min_paired_share": MIN_PAIRED_SHARE, "allow_partial": args.allow_partial, "models": paired}
    shard = process_shard()   # several processes judge their share of the judgements; one: all of them
    judge = model_from_args(args, "judge")
    with StagedOutput(args.output, folder=True, tag=shard.tag) as out:
        return _judge_and_rate(args, prompts, responses, extraction, jobs, judge, shard, out, paired)


def _judge_and_rate(args, prompts: dict, responses: dict, extraction: dict, jobs: list, judge, shard, out,
                    paired: dict) -> int:
    from jaxwrite.evals.arena import (PROMPT_LABEL, battles_from_records, judge_arena, pairwise_failures,
                                      pairwise_judge_info, plot_elo, rate_arena)
    from jaxwrite.evals.judging import judge_block

    os.makedirs(out.path, exist_ok=True)
    records = judge_arena(prompts, responses, judge, os.path.join(out.path, "verdicts.jsonl"),
                          extraction={name: e["applied"] for name, e in extraction.items()},
                          temperature=args.judge_temperature, max_tokens=args.judge_max_tokens,
                          seed=args.seed, batch_size=4 * judge.concurrency, shard=shard, mirror=out.mirror)
    if not shard.is_lead:
        return 0   # the lead rates the merged verdicts and writes the report
    # This run's judgements only: the verdicts file may hold other models' too.
    by_key = {rec["key"]: rec for rec in records}
    ran = [by_key[job.key] for job in jobs if job.key in by_key]
    result = rate_arena(battles_from_records(ran), models=sorted(responses), anchor_model=args.anchor,
                        bootstrap=args.bootstrap, seed=args.seed)
    info = pairwise_judge_info(judge, args.judge_temperature, args.judge_max_tokens, args.seed)
    summary = {"benchmark": "arena", "judge": judge.label, **result.summary(), "answer_extraction": extraction,
               "pairing": paired, **judge_block(info, PROMPT_LABEL, extraction, pairwise_failures(ran, len(jobs)))}
    _write_report(out.path, result, summary, plot_elo(result, os.path.join(out.path, "elo.png")))
    if result.status != "ok":
        print(json.dumps({"status": result.status, "judgements": len(jobs), "invalid": result.n_invalid}))
        print(f"arena: {result.status}: none of the {len(jobs)} judgements gave a valid verdict, so no model "
              f"is rated; see Judging in {os.path.join(args.output, 'report.md')}", file=sys.stderr)
        return 0
    rated = sorted((m for m in result.models if result.elo[m] is not None), key=lambda m: -result.elo[m])
    print(json.dumps({m: round(result.elo[m], 1) for m in rated}))
    if result.n_invalid:
        print(f"warning: {result.n_invalid} verdicts could not be parsed and are left out", file=sys.stderr)
    return 0


def _write_report(out_dir: str, result, summary: dict, figure: str | None) -> None:
    from jaxwrite.evals.judging import answer_extraction_markdown
    from jaxwrite.evals.report import Section, markdown_table, write_report

    models = summary["pairing"]["models"]
    # Rated models best first, then those never rated (no valid verdict).
    order = sorted(result.models, key=lambda m: (result.elo[m] is None, -(result.elo[m] or 0.0)))
    ratings = markdown_table(["model", "Elo", "95% CI low", "95% CI high"],
                             [[m, result.elo[m], *(result.ci[m] or (None, None))] for m in order], digits=1)
    if result.status != "ok":
        ratings = ("No valid battles: no judgement gave a valid verdict, so no model is rated (see Judging "
                   "for the reasons).")
    rates = markdown_table(["row vs column", *order],
                           [[m, *[None if m == o else result.win_rate[m][o] for o in order]] for m in order])
    pos = result.position
    bias = markdown_table(["statistic", "value"], [[k, v] for k, v in pos.items()], digits=3)
    notes = ("- Elo = anchor + 400/ln10 x BT strength; ties count as half a win for each side; a model "
             "without a valid verdict is not rated\n"
             f"- Rated 1000: {summary['anchor']}\n"
             f"- Valid verdicts: {result.n_battles}; unparseable (left out): {result.n_invalid}\n"
             f"- Unpaired prompts (not judged): "
             + (", ".join(f"{m} {len(p['unpaired'])}" for m, p in models.items() if p["unpaired"]) or "none"))
    extraction = "\n\n".join(f"### {name}\n\n" + answer_extraction_markdown(e)
                               for name, e in summary["answer_extraction"].items())
    pairing = ("Prompts only one model answered are never judged (refused below "
               f"{summary['pairing']['min_paired_share']:.0%} of a model's prompts unless --allow-partial).\n\n"
               + markdown_table(["model", "answered", "judged", "unpaired (not judged)", "unpaired ids"],
                                [[m, p["answered"], p["paired"], len(p["unpaired"]),
                                  ", ".join(map(str, p["unpaired"])) or "-"] for m, p in models.items()]))
    write_report(out_dir, "Pairwise arena (reimplementation)", summary, [
        Section("Ratings", ratings, (figure,) if figure else ()),
        Section("Win rates (row's score against column; ties = 1/2)", rates),
        Section("Position bias", "first_wins = share of valid verdicts won by the response shown first; "
                "consistency = share of (prompt, pair) judged alike in both orders.\n\n" + bias),
        Section("Pairing (which prompts were judged)", pairing),
        Section("Answer extraction (only answers are compared)", extraction),
        Section("Notes", notes),
    ])
