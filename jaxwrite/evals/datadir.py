"""A benchmark's folder under the data root, found by the one data-dir rule (jaxwrite.common.data_dir)."""
from __future__ import annotations

import os
import pathlib

from jaxwrite.common.data_dir import DATA_DIR_ENV, find_data_dir

__all__ = ["DATA_DIR_ENV", "resolve_data_dir"]

# Benchmarks the embedded sample holds whole (its upstream files unchanged), so a score computed on it
# is the real one; for the others it holds a few items, too few for a benchmark figure, so an evaluator
# takes the sample only when asked by name (`--data-dir sample`).
WHOLE_IN_SAMPLE = ("longbench_write",)


def resolve_data_dir(data_dir: str | os.PathLike | None, benchmark: str) -> pathlib.Path:
    """The benchmark's folder `<root>/<benchmark>`, with a one-line error when no data root holds it."""
    return find_data_dir(data_dir, (benchmark,), sample_ok=benchmark in WHOLE_IN_SAMPLE) / benchmark
