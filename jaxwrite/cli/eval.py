"""`jaxwrite eval BENCHMARK ...`: one sub-subcommand per benchmark, each in `_eval_<name>.py`."""
from __future__ import annotations

import importlib
import pkgutil

import jaxwrite.cli as cli_pkg


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval", help="score and aggregate benchmarks (WritingBench, LongBench-Write, arena, RefineBench, agreement)")
    benchmarks = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    for info in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_eval_"):
            importlib.import_module(f"{cli_pkg.__name__}.{info.name}").register(benchmarks)
