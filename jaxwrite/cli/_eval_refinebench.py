"""`jaxwrite eval refinebench`: multi-turn refinement with a checklist judge, Acc_t / Pass_t report.

Several processes started the same way run every n-th problem each (all its turns) into a part file; the
first merges them and writes the report. The output folder may be in a bucket (gs://...), staged locally
(`jaxwrite.common.remote.StagedOutput`)."""
from __future__ import annotations

import json
import os

from jaxwrite.common.data_dir import DATA_DIR_HELP
from jaxwrite.common import InputError
from jaxwrite.cli._model_args import add_model_args, check_model_args, model_from_args


def register(benchmarks) -> None:
    parser = benchmarks.add_parser(
        "refinebench", help="RefineBench: self / guided / partially guided refinement, Acc_t and Pass_t")
    add_model_args(parser, "model", "the model under test", required=True)
    add_model_args(parser, "judge", "the checklist judge", required=True, modes=("generate",),
                   verdict="checklist Yes/No verdicts")
    parser.add_argument("--mode", choices=["self", "guided", "partial"], default="guided")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--partial-ratio", type=float, default=0.5,
                        help="partial mode: share of checklist items that may be revealed")
    parser.add_argument("--output", required=True, help="output directory (turns.jsonl, report); gs:// works")
    parser.add_argument("--data-dir", help="data root containing refinebench/ " + DATA_DIR_HELP)
    parser.add_argument("--indices", nargs="+", help="only these problem indices (refinebench-NNNNNN)")
    parser.add_argument("--fields", nargs="+", help="only these fields (e.g. Math Law)")
    parser.add_argument("--limit", type=int, help="only the first N selected problems")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-temperature", type=float, default=0.0)
    parser.add_argument("--model-max-tokens", type=int, default=8192)
    parser.add_argument("--judge-max-tokens", type=int, default=2048)
    parser.set_defaults(func=run)


def run(args) -> int:
    from jaxwrite.chat import SamplingParams
    from jaxwrite.common.remote import StagedOutput
    from jaxwrite.common.data_dir import benchmark_dir
    from jaxwrite.evals.refinebench_data import load_refinebench
    from jaxwrite.evals.refinebench_loop import RefineConfig
    from jaxwrite.parallel import process_shard

    if args.turns < 1 or not 0.0 <= args.partial_ratio <= 1.0:
        raise InputError("--turns: expected >= 1; --partial-ratio: expected a number in [0, 1]")
    check_model_args(args, "model")   # option errors (a key refused, a missing name) before any data is read
    check_model_args(args, "judge")
    data = load_refinebench(benchmark_dir(args.data_dir, "refinebench").parent)
    problems = data.problems
    if args.indices:
        missing = sorted(set(args.indices) - {p.index for p in problems})
        if missing:
            raise InputError(f"--indices: unknown problem(s) {', '.join(missing)}")
        problems = [p for p in problems if p.index in set(args.indices)]
    if args.fields:
        problems = [p for p in problems if p.field in set(args.fields)]
    problems = problems[:args.limit] if args.limit is not None else problems
    if not problems:
        raise InputError("no problems selected")
    shard = process_shard()   # several processes run their share of the problems; one: all of them
    model, judge = model_from_args(args, "model"), model_from_args(args, "judge")
    cfg = RefineConfig(mode=args.mode, turns=args.turns, partial_ratio=args.partial_ratio, seed=args.seed,
                       batch_size=max(model.concurrency, judge.concurrency),
                       model_sampling=SamplingParams(temperature=args.model_temperature,
                                                     max_new_tokens=args.model_max_tokens),
                       judge_sampling=SamplingParams(temperature=0.0, max_new_tokens=args.judge_max_tokens))
    with StagedOutput(args.output, folder=True, tag=shard.tag) as out:
        return _refine_and_report(args, data, problems, model, judge, cfg, shard, out)


def _refine_and_report(args, data, problems, model, judge, cfg, shard, out) -> int:
    from jaxwrite.chat import describe_model
    from jaxwrite.evals.refinebench_loop import run_refinebench
    from jaxwrite.evals.refinebench_metrics import refinebench_metrics

    os.makedirs(out.path, exist_ok=True)
    records = run_refinebench(problems, model, judge, os.path.join(out.path, "turns.jsonl"), cfg,
                              shard=shard, mirror=out.mirror)
    if not shard.is_lead:
        return 0   # the lead scores the merged turns and writes the report
    metrics = refinebench_metrics(records, problems, args.turns)
    summary = {"benchmark": "refinebench", "mode": args.mode, "partial_ratio": args.partial_ratio,
               "model": model.label, "model_info": describe_model(model, cfg.model_sampling, cfg.tries),
               "judge": judge.label, "data_conflicts": data.conflicts, **metrics}
    usage = {"judge": judge.usage_dict() | {"scope": "this run"}, "model": model.usage_dict() | {"scope": "this run"}}
    summary |= _judging(summary, describe_model(judge, cfg.judge_sampling, cfg.tries), usage)
    _write_report(out.path, summary)
    print(json.dumps({k: summary["overall"][k] for k in ("acc", "pass")} if "overall" in summary else summary))
    return 0


def _judging(summary: dict, judge_info: dict, usage: dict) -> dict:
    """The `judging` block: the checklist judge, the prompts' version, what was not scored, and what the
    judge's and the model under test's calls cost."""
    from jaxwrite.evals.refinebench_prompts import PROMPT_LABEL
    from jaxwrite.evals.judging import judge_block

    failures = {"judged turns whose checklist answer never parsed (all items counted as No)":
                summary.get("judge_calls_unparsed", 0),
                "problems stopped early by model errors (carried forward; a re-run continues them)":
                summary.get("incomplete", 0),
                "problems never answered (model errors on turn 1)": summary.get("n_missing", 0)}
    return judge_block(judge_info, PROMPT_LABEL, "the judge grades the text after the last '</think>'; "
                       "the conversation keeps the full text", failures, usage=usage)


def _write_report(out_dir: str, summary: dict) -> None:
    from jaxwrite.evals.refinebench_metrics import plot_curves
    from jaxwrite.evals.refinebench_prompts import PROMPT_LABEL
    from jaxwrite.evals.report import Section, markdown_table, write_report

    turns = summary["turns"]
    sections = []
    if "overall" in summary:
        head = ["group", "n", *[f"Acc_{t}" for t in range(1, turns + 1)], *[f"Pass_{t}" for t in range(1, turns + 1)]]
        rows = [["overall", summary["overall"]["n"], *summary["overall"]["acc"], *summary["overall"]["pass"]]]
        for kind in ("by_exam_type", "by_field"):
            rows += [[name, c["n"], *c["acc"], *c["pass"]] for name, c in summary[kind].items()]
        figure = plot_curves(summary, os.path.join(out_dir, "curves.png"), f"RefineBench ({summary['mode']})")
        sections.append(Section("Acc_t and Pass_t (%)", markdown_table(head, rows, digits=1), (figure,)))
    counts = [[k, summary.get(k)] for k in ("n_problems", "n_missing", "incomplete", "mean_turns_used",
                                              "judge_unparsed_items", "judge_calls_unparsed")]
    notes = (f"- {PROMPT_LABEL}\n- Model under test: {summary['model']}\n"
             f"- Problems that stopped early keep their last state for later turns (carry-forward)\n"
             f"- Unparseable judge output counts as No for its items\n"
             f"- Sample files: 109-file kept where the two disagree ({', '.join(summary['data_conflicts'])})")
    sections += [Section("Counts", markdown_table(["count", "value"], counts)), Section("Notes", notes)]
    write_report(out_dir, f"RefineBench, {summary['mode']} mode (reimplementation)", summary, sections)
