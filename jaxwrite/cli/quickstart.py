"""`jaxwrite quickstart [--data-dir DIR] [--workdir W]`: the whole system once, tiny, on a CPU."""
from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "quickstart", help="run everything once at tiny scale on a CPU (~15 min) and write W/report.md",
        description="Trains a tokenizer, a tiny continual-pretraining run, a tiny Bradley-Terry reward model "
                    "and a few GRPO steps with all three rewards; generates for a WritingBench and a "
                    "LongBench-Write sample, scores them with a local judge and writes W/report.md and "
                    "W/report.html. Re-running resumes.")
    p.add_argument("--data-dir", help="data root (writingbench/, corpus_en/, ...); default $JAXWRITE_DATA_DIR "
                                      "or ../shared/data beside the repository")
    p.add_argument("--workdir", default="quickstart", help="output folder (default ./quickstart)")
    p.add_argument("--grpo-steps", type=int, default=None, help="GRPO steps (default: configs/grpo_tiny.py's)")
    p.add_argument("--writingbench-queries", type=int, default=6)
    p.add_argument("--longbench-items", type=int, default=8)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxwrite.quickstart import run_quickstart
    from jaxwrite.train import default_data_dir

    run_quickstart(args.data_dir or default_data_dir(), args.workdir, grpo_steps=args.grpo_steps,
                   wb_queries=args.writingbench_queries, lbw_items=args.longbench_items,
                   progress=not args.no_progress)
    return 0
