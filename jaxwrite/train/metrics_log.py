"""Run metrics: one JSON object per logged step in <workdir>/metrics.jsonl, and the same numbers to each
tracker (TensorBoard events, W&B: jaxwrite.train.tracking)."""
from __future__ import annotations

import math
import os
from typing import Sequence

from jaxwrite.common import append_jsonl, scan_jsonl, write_jsonl


def truncate_after(path: str, step: int) -> None:
    """Drops records with step > `step` (logged by a run killed after its last checkpoint), so a
    resumed run re-logs those steps once instead of duplicating them. A line cut by the kill is
    dropped too."""
    if not os.path.exists(path):
        return
    kept = [rec for _, rec, err in scan_jsonl(path) if err is None and rec.get("step", 0) <= step]
    write_jsonl(path, kept)


class MetricsLog:
    def __init__(self, workdir: str, start_step: int, trackers: Sequence | None = None):
        """trackers: where the numbers go besides metrics.jsonl; None = TensorBoard alone."""
        from jaxwrite.train.tracking import TensorBoardTracker

        self.path = os.path.join(workdir, "metrics.jsonl")
        truncate_after(self.path, start_step)
        self._trackers = list(trackers) if trackers is not None else [TensorBoardTracker(workdir, start_step)]

    def write(self, step: int, metrics: dict[str, float]) -> None:
        from jaxwrite.train.tracking import finite_scalars

        record = {"step": int(step), **{k: _json_number(v) for k, v in metrics.items()}}
        append_jsonl(self.path, record)
        scalars = finite_scalars(metrics)
        for tracker in self._trackers:
            tracker.log(step, scalars)

    def close(self) -> None:
        for tracker in self._trackers:
            tracker.close()


def _json_number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)   # JSON has no NaN/Inf; keep the value visible as a string
    return v
