"""What the training loop does besides the step: hooks, each run every N steps and at the last step.

A hook is `fn(info: StepInfo) -> None`; the trainer runs its hooks in the order they were added, after
each step. The hooks due at a logging step add fields to `info.record`, and the log hook (added after
them) writes the record as one metrics.jsonl row.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from jaxwrite.train.step import is_max_metric
from jaxwrite.train.throughput import mfu


@dataclasses.dataclass
class StepInfo:
    step: int
    metrics: dict[str, float]      # this step's training metrics (empty before the first step)
    tokens: int = 0                # positions the model ran on in this step, all processes together
    seq_len: int = 0               # their row length
    seconds: float = 0.0           # wall time of the step (with compilation on a process's first step)
    data_seconds: float = 0.0      # wall time the step waited for its batch (a GRPO rollout, or its wait)
    record: dict[str, float] = dataclasses.field(default_factory=dict)   # this step's metrics.jsonl row


@dataclasses.dataclass(frozen=True)
class Hook:
    fn: Callable[[StepInfo], None]
    every: int
    at_start: bool = False         # also at step 0, before the first step of a run that is not resumed

    def __post_init__(self):
        if int(self.every) < 1:
            raise ValueError(f"hook every={self.every}: expected a positive number of steps")

    def due(self, step: int, last_step: int) -> bool:
        return step % self.every == 0 or step == last_step


def mean_metrics(batches: list[dict]) -> dict[str, float]:
    """Key-wise mean of metric dicts that share their keys ({} for none); the max of *_max metrics."""
    return {k: float((np.max if is_max_metric(k) else np.mean)([b[k] for b in batches]))
            for k in batches[0]} if batches else {}


class IntervalMetrics:
    """Training metrics, learning rate, tokens/s and MFU over each logging interval, and the mean seconds
    a step waited for its batch (time/data_s) and spent in the update (time/update_s).

    `observe` runs every step and `report` at each logging step. The first step of a process compiles,
    so its time is left out of the rate unless it is the only step of the interval.
    """

    def __init__(self, flops_per_token: Callable[[int], float], peak_flops: float,
                 learning_rate: Callable[[int], float]):
        self._flops, self._peak, self._lr = flops_per_token, peak_flops, learning_rate
        self._compiled = False
        self._reset()

    def _reset(self) -> None:
        self._seconds, self._tokens, self._metrics = 0.0, 0, []
        self._times: list[tuple[float, float]] = []

    def observe(self, info: StepInfo) -> None:
        self._times.append((info.data_seconds, info.seconds))
        if self._compiled:
            self._seconds += info.seconds
            self._tokens += info.tokens
        self._compiled = True
        self._metrics.append(info.metrics)

    def report(self, info: StepInfo) -> None:
        if self._seconds == 0:   # only the compiling step in this interval: report it as is
            self._seconds, self._tokens = info.seconds, info.tokens
        tok_s = self._tokens / self._seconds
        info.record.update(mean_metrics(self._metrics))
        data_s, update_s = np.mean(self._times, axis=0)
        info.record.update({"lr": float(self._lr(info.step - 1)), "tokens_per_sec": tok_s,
                            "mfu": mfu(self._flops(info.seq_len), tok_s, self._peak),
                            "time/data_s": float(data_s), "time/update_s": float(update_s)})
        self._reset()


def source_metrics(drain: Callable[[], list[dict[str, float]]]) -> Callable[[StepInfo], None]:
    """A hook adding the means of what a batch source measured since the last logging step (GRPO's
    rollout rewards, lengths and guard rails) to the record."""
    def add(info: StepInfo) -> None:
        info.record.update(mean_metrics(drain()))
    return add
