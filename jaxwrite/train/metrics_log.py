"""Run metrics: one JSON object per logged step in <workdir>/metrics.jsonl, and TensorBoard events."""
from __future__ import annotations

import math
import os

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
    def __init__(self, workdir: str, start_step: int):
        self.path = os.path.join(workdir, "metrics.jsonl")
        truncate_after(self.path, start_step)
        from tensorboardX import SummaryWriter   # slow import (~3 s); only when a run logs

        # purge_step hides events a killed run wrote past the checkpoint we resume from.
        self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=start_step + 1)

    def write(self, step: int, metrics: dict[str, float]) -> None:
        record = {"step": int(step), **{k: _json_number(v) for k, v in metrics.items()}}
        append_jsonl(self.path, record)
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                self._tb.add_scalar(k, v, step)
        self._tb.flush()

    def close(self) -> None:
        self._tb.close()


def _json_number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)   # JSON has no NaN/Inf; keep the value visible as a string
    return v
