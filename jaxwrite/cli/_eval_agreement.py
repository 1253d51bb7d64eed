"""`jaxwrite eval agreement`: a pairwise judge against WritingPreferenceBench expert labels (A/B/Tie).

Several processes started the same way judge every n-th judgement each into a part file; the first merges
them and writes the report. The output folder may be in a bucket (gs://...), staged locally
(`jaxwrite.common.remote.StagedOutput`)."""
from __future__ import annotations

import json
import os

from jaxwrite.common.data_dir import DATA_DIR_HELP
from jaxwrite.cli._model_args import add_model_args, check_model_args, model_from_args


def register(benchmarks) -> None:
    parser = benchmarks.add_parser(
        "agreement", help="judge-human agreement on WritingPreferenceBench pairs: rate, Cohen's kappa")
    add_model_args(parser, "judge", "the pairwise judge", required=True, modes=("generate",),
                   verdict="a pairwise [[A]]/[[B]]/[[C]] verdict")
    parser.add_argument("--output", required=True, help="output directory (verdicts.jsonl, report); gs:// works")
    parser.add_argument("--data-dir", help="data root containing preferences/ " + DATA_DIR_HELP)
    parser.add_argument("--max-pairs", type=int, help="seeded random subset of at most N pairs")
    parser.add_argument("--pairs-per-prompt", type=int, help="seeded cap on pairs per prompt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--single-order", action="store_true",
                        help="judge each pair once (default: both orders, disagreement = Tie)")
    parser.add_argument("--judge-temperature", type=float, default=0.0)
    parser.add_argument("--judge-max-tokens", type=int, default=2048)
    parser.set_defaults(func=run)


def run(args) -> int:
    from jaxwrite.common.remote import StagedOutput
    from jaxwrite.evals.agreement import POOL_PATH, build_agreement_pairs
    from jaxwrite.common.data_dir import benchmark_dir
    from jaxwrite.parallel import process_shard

    check_model_args(args, "judge")   # a bad judge option fails before the pool is read
    pool = benchmark_dir(args.data_dir, "preferences") / POOL_PATH
    pairs = build_agreement_pairs(str(pool), seed=args.seed, pairs_per_prompt=args.pairs_per_prompt,
                                  max_pairs=args.max_pairs)
    shard = process_shard()   # several processes judge their share of the judgements; one: all of them
    judge = model_from_args(args, "judge")
    with StagedOutput(args.output, folder=True, tag=shard.tag) as out:
        return _judge_and_report(args, pairs, judge, shard, out)


def _judge_and_report(args, pairs, judge, shard, out) -> int:
    from jaxwrite.common import read_jsonl
    from jaxwrite.evals.agreement import judge_agreement_pairs, judge_human_agreement, length_baseline_labels
    from jaxwrite.evals.arena import PROMPT_LABEL, pairwise_failures, pairwise_judge_info
    from jaxwrite.evals.judging import judge_block

    os.makedirs(out.path, exist_ok=True)
    verdicts_path = os.path.join(out.path, "verdicts.jsonl")
    labels = judge_agreement_pairs(pairs, judge, verdicts_path,
                                   both_orders=not args.single_order, temperature=args.judge_temperature,
                                   max_tokens=args.judge_max_tokens, seed=args.seed,
                                   batch_size=4 * judge.concurrency, shard=shard, mirror=out.mirror)
    if not shard.is_lead:
        return 0   # the lead reads the merged verdicts and writes the report
    human = [p.label for p in pairs]
    result = judge_human_agreement([labels[p.pair_id] for p in pairs], human, args.bootstrap, args.seed)
    baseline = judge_human_agreement(length_baseline_labels(pairs), human, args.bootstrap, args.seed)
    summary = {"benchmark": "agreement", "judge": judge.label, "prompt": PROMPT_LABEL,
               "both_orders": not args.single_order, "n_pairs": len(pairs),
               "human_labels": {k: human.count(k) for k in ("A", "B", "Tie")},
               "judge_vs_human": result, "length_baseline_vs_human": baseline}
    # Who judged and how, and the judgements of these pairs that gave no verdict, and why.
    ids, orders = {p.pair_id for p in pairs}, ("ab",) if args.single_order else ("ab", "ba")
    ran = [r for _, r in read_jsonl(verdicts_path) if r.get("pair_id") in ids and r.get("order") in orders
           ] if os.path.exists(verdicts_path) else []
    info = pairwise_judge_info(judge, args.judge_temperature, args.judge_max_tokens, args.seed)
    summary |= judge_block(info, PROMPT_LABEL, "none: the pool's responses are sent as they are",
                           pairwise_failures(ran, len(pairs) * len(orders)),
                           usage={"judge": judge.usage_dict() | {"scope": "this run"}})
    _write_report(out.path, summary)
    print(json.dumps({k: result.get(k) for k in ("n", "n_unlabelled", "agreement", "kappa")}))
    return 0


def _write_report(out_dir: str, summary: dict) -> None:
    from jaxwrite.evals.report import Section, markdown_table, write_report

    rows = []
    for name, key in (("judge", "judge_vs_human"), ("longer response wins", "length_baseline_vs_human")):
        r = summary[key]
        rows.append([name, r["n"], r.get("agreement"), *(r.get("agreement_ci95") or [None, None]),
                     r.get("kappa"), *(r.get("kappa_ci95") or [None, None])])
    table = markdown_table(["labeller", "n", "agreement", "CI low", "CI high", "kappa", "CI low", "CI high"],
                           rows, digits=3)
    conf = summary["judge_vs_human"].get("confusion", {})
    confusion = markdown_table(["judge \\ human", "A", "B", "Tie"],
                               [[j, *[conf[j][h] for h in ("A", "B", "Tie")]] for j in conf])
    notes = (f"- Judge: {summary['judge']}; {summary['prompt']}\n"
             f"- Human label: mean expert score per response; Tie when the difference is below 1\n"
             f"- Both orders: {summary['both_orders']} (orders that disagree count as Tie)\n"
             f"- Pairs without a parseable judge verdict: {summary['judge_vs_human']['n_unlabelled']}\n"
             f"- Human labels: {summary['human_labels']}")
    write_report(out_dir, "Judge-human agreement (WritingPreferenceBench pool)", summary, [
        Section("Agreement and Cohen's kappa (3 classes, 95% bootstrap CI)", table),
        Section("Confusion matrix", confusion), Section("Notes", notes)])
