"""`jaxwrite eval writingbench {score,aggregate,report}`."""
from __future__ import annotations

import json
import pathlib
import sys

from jaxwrite.common.data_dir import DATA_DIR_HELP
from jaxwrite.cli._model_args import JUDGE_MODES, add_model_args, model_from_args

ANSWER_EXTRACTION_HELP = (
    "what of each response is judged and counted: auto (default) = only the <answer> block for "
    "think/answer outputs (a file with <answer> tags or from generate --think-answer; malformed ones are "
    "counted and not scored), else everything after the first '</think>\\n\\n' (official current code); "
    "think_answer / official_strip force one of the two; none = sent as is")


# = jaxwrite.text.ANSWER_EXTRACTION_MODES, spelled out so building the parser does not import the tokenizers.
ANSWER_EXTRACTION_CHOICES = ("auto", "think_answer", "official_strip", "none")


def add_answer_extraction_args(parser, help_suffix: str = "") -> None:
    """--answer-extraction: what of each response is judged and counted (one rule for every command)."""
    parser.add_argument("--answer-extraction", choices=ANSWER_EXTRACTION_CHOICES, default="auto",
                        help=ANSWER_EXTRACTION_HELP + help_suffix)


_META_HELP = ("the score file's metadata, for who judged and how (the 'judging' block) and the answer "
              "extraction counts (default: <scores>.meta.json when it exists)")


def register(benchmarks) -> None:
    parser = benchmarks.add_parser("writingbench", help="WritingBench: critic scoring and official aggregation")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)

    score = actions.add_parser("score", help="score responses criterion by criterion with a critic judge")
    score.add_argument("--responses", required=True, help='jsonl of {"index": i, "response": "..."}')
    # The critic verdict is one 1-10 score: score_logit works.
    add_model_args(score, "judge", "the critic judge", required=True, modes=JUDGE_MODES)
    score.add_argument("--output", required=True, help="score file (official format), resumable")
    score.add_argument("--data-dir", help="data root containing writingbench/ " + DATA_DIR_HELP)
    add_answer_extraction_args(score)
    score.add_argument("--limit", type=int, help="score only the first N selected queries")
    score.add_argument("--indices", type=int, nargs="+", help="score only these query indices")
    score.add_argument("--seeds", type=int, nargs="+", default=[0],
                       help="judge seeds; several give one score file each and a mean ± std summary")
    score.add_argument("--report-dir", help="also write summary.json / report.md / report.html here")
    score.add_argument("--attempts", type=int, default=None,
                       help="verdicts sampled per criterion until one parses (default 15, as the official "
                            "evaluator; recorded in the metadata); a score_logit judge reads one")
    score.set_defaults(func=run_score)

    agg = actions.add_parser("aggregate", help="official aggregation of a score file (1-10 scale)")
    agg.add_argument("--scores", required=True, help="score file of `score` (when that run scored no query, "
                                                   "its .meta.json alone gives count 0 and why in 'judging')")
    agg.add_argument("--data-dir", help="data root containing writingbench/ " + DATA_DIR_HELP)
    agg.add_argument("--output", help="also write the JSON object to this file")
    agg.add_argument("--meta", help=_META_HELP)
    agg.set_defaults(func=run_aggregate)

    rep = actions.add_parser("report", help="aggregate a score file and write summary.json, report.md/.html")
    rep.add_argument("--scores", required=True)
    rep.add_argument("--data-dir", help="data root containing writingbench/ " + DATA_DIR_HELP)
    rep.add_argument("--output", required=True, help="report directory")
    rep.add_argument("--meta", help=_META_HELP)
    rep.set_defaults(func=run_report)


def _aggregate(scores_path: str, data_dir: str | None, meta: dict | None) -> dict:
    from jaxwrite.evals.writingbench_aggregate import aggregate_writingbench, read_score_file
    from jaxwrite.evals.writingbench_data import load_requirement_subsets, load_writingbench

    queries = load_writingbench(data_dir)
    # A score run in which every query failed leaves its .meta.json and no score file: it aggregates
    # nothing (count 0), and the judging block says why, as `score --report-dir` shows it.
    scored_nothing = meta is not None and not pathlib.Path(scores_path).exists()
    scores = {} if scored_nothing else read_score_file(scores_path, queries)
    return aggregate_writingbench(scores, queries, load_requirement_subsets(data_dir))


def run_aggregate(args) -> int:
    from jaxwrite.evals.report_json import finite_json, write_json
    from jaxwrite.evals.writingbench_aggregate import read_score_meta
    from jaxwrite.evals.writingbench_report import writingbench_judging

    meta = read_score_meta(args.scores, args.meta)
    result = _aggregate(args.scores, args.data_dir, meta)
    result["judging"] = writingbench_judging(meta, args.scores)
    if args.output:
        from jaxwrite.common.remote import StagedOutput
        with StagedOutput(args.output, pull=False) as out:   # a bucket path: written locally, then copied there
            pathlib.Path(out.path).parent.mkdir(parents=True, exist_ok=True)
            write_json(out.path, result)
    print(json.dumps(finite_json(result)[0], ensure_ascii=False, indent=1))
    return 0


def run_report(args) -> int:
    from jaxwrite.evals.writingbench_aggregate import read_score_meta
    from jaxwrite.evals.writingbench_report import writingbench_judging, writingbench_report

    meta = read_score_meta(args.scores, args.meta)
    extraction = (meta or {}).get("answer_extraction")
    paths = writingbench_report(_aggregate(args.scores, args.data_dir, meta), args.output,
                                extraction=extraction if isinstance(extraction, dict) else None,
                                judging=writingbench_judging(meta, args.scores))
    print(paths["html"])
    return 0


def run_score(args) -> int:
    from jaxwrite.common.errors import InputError
    from jaxwrite.evals.writingbench_critic import OFFICIAL_ATTEMPTS
    from jaxwrite.evals.writingbench_report import writingbench_report
    from jaxwrite.evals.writingbench_score import WritingBenchScoring, score_writingbench
    from jaxwrite.parallel import process_shard

    if args.attempts is not None and args.attempts < 1:
        raise InputError(f"--attempts: expected a positive number of tries per criterion, got {args.attempts}")
    scoring = WritingBenchScoring(data_dir=args.data_dir, answer_extraction=args.answer_extraction,
                                  seeds=tuple(args.seeds), indices=args.indices, limit=args.limit,
                                  batch_queries=args.judge_concurrency, attempts=args.attempts or OFFICIAL_ATTEMPTS)
    shard = process_shard()   # several processes judge their share of the queries; one: all of them
    judge = model_from_args(args, "judge")
    result = score_writingbench(args.responses, judge, args.output, scoring, shard=shard)
    if not shard.is_lead:
        return 0   # the lead reports the merged scores
    if args.report_dir:
        note = "The official metric uses the WritingBench critic model; another judge gives another metric."
        writingbench_report(result["runs"][0]["aggregate"], args.report_dir, judge_note=note,
                            extraction=result["answer_extraction"], judging=result["judging"])
    print(json.dumps(result, ensure_ascii=False, indent=1))
    failed = sum(r["failed"] for r in result["runs"])
    if result["answer_extraction"]["malformed"]:
        print(f"warning: {result['answer_extraction']['malformed']} malformed think/answer responses were not "
              f"scored; see answer_extraction in {args.output}.meta.json", file=sys.stderr)
    if failed:   # as generate does: a pipeline must notice queries left unscored (each kind is told above)
        print(f"writingbench score: {failed} queries could not be scored (not in the score file; see its "
              f"failures file); exit status 1", file=sys.stderr)
        return 1
    return 0
