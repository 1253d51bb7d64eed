"""`jaxwrite eval longbench-write score`: length score always, quality score when a judge is given."""
from __future__ import annotations

import json

from jaxwrite.common.data_dir import DATA_DIR_HELP
from jaxwrite.cli._eval_writingbench import add_answer_extraction_args
from jaxwrite.cli._model_args import add_model_args, model_from_args


def register(benchmarks) -> None:
    parser = benchmarks.add_parser("longbench-write", help="LongBench-Write / LongWrite-Ruler: S_l, S_q, S")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    score = actions.add_parser("score", help="score a response file and write a report directory")
    score.add_argument("--responses", required=True,
                       help='jsonl of {"index": 1-based line number in the benchmark file, "response": "..."}')
    score.add_argument("--output", required=True, help="output directory (scores, plot, summary, report)")
    score.add_argument("--data-dir", help="data root containing longbench_write/ " + DATA_DIR_HELP)
    score.add_argument("--benchmark", default="longbench_write",
                       choices=["longbench_write", "longbench_write_en", "longwrite_ruler"])
    # Without a judge only S_l is computed (the paper's quality judge was gpt-4o-2024-05-13).
    add_model_args(score, "judge", "the quality judge (optional)", modes=("generate",),
                   verdict="LongBench-Write's six 1-5 dimension scores in a JSON verdict")
    score.add_argument("--seed", type=int, default=0)
    add_answer_extraction_args(score)
    score.set_defaults(func=run_score)


def run_score(args) -> int:
    from jaxwrite.evals.longbench_write_run import score_longbench_write

    from jaxwrite.parallel import process_shard

    # Any judge option, --judge-mode included, asks for a judge: model_from_args refuses a bad set.
    judge = model_from_args(args, "judge")

    shard = process_shard() if judge is not None else None   # judging is what several processes share
    summary = score_longbench_write(args.responses, args.output, args.data_dir, subset=args.benchmark,
                                    judge=judge, answer_extraction=args.answer_extraction, seed=args.seed,
                                    batch_size=2 * args.judge_concurrency, shard=shard)
    if shard is not None and not shard.is_lead:
        return 0   # the lead prints and writes the report
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    return 0
