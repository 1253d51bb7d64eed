"""Background batching for the server: requests from many HTTP threads run as one engine batch.

Handler threads `submit` a request and read events from its own queue. One worker thread owns the
engine: it blocks for the first waiting request, collects more for `gather_s` (a few ms) up to
`max_rows` sample rows, and runs them together, pushing text deltas and finished samples back.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any

from jaxwrite.infer.engine import Completion, Engine, GenerationRequest


class Job:
    """One submitted request; `events` yields ("delta", sample_index, text), ("done", Completion)
    or ("error", None, message)."""

    def __init__(self, request: GenerationRequest, stream: bool):
        self.request = request
        self.stream = stream
        self.events: queue.Queue[tuple[str, Any, Any]] = queue.Queue()


class Batcher:
    def __init__(self, engine: Engine, gather_s: float = 0.005, max_rows: int | None = None):
        self.engine = engine
        self.gather_s = gather_s
        self.max_rows = max_rows or engine.max_batch
        self._waiting: queue.Queue[Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="jaxwrite-batcher", daemon=True)
        self._thread.start()
        self.batches_run = 0
        self.largest_batch = 0

    def submit(self, request: GenerationRequest, stream: bool = False) -> Job:
        job = Job(request, stream)
        self._waiting.put(job)
        return job

    def close(self) -> None:
        self._waiting.put(None)
        self._thread.join(timeout=10)

    def _collect(self, first: Job) -> tuple[list[Job], bool]:
        jobs, rows = [first], first.request.params.n
        deadline = time.monotonic() + self.gather_s
        while rows < self.max_rows:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                job = self._waiting.get(timeout=left)
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
            rows += job.request.params.n
        return jobs, False

    def _loop(self) -> None:
        while True:
            first = self._waiting.get()
            if first is None:
                return
            jobs, closing = self._collect(first)
            self._run(jobs)
            if closing:
                return

    def _run(self, jobs: list[Job]) -> None:
        self.batches_run += 1
        self.largest_batch = max(self.largest_batch, len(jobs))

        def on_text(index: int, sample: int, delta: str) -> None:
            if jobs[index].stream:
                jobs[index].events.put(("delta", sample, delta))

        try:
            for completion in self.engine.stream([j.request for j in jobs], on_text=on_text):
                jobs[completion.request_index].events.put(("done", completion.sample_index, completion))
        except Exception as err:  # the engine failed for the whole batch: every waiting job hears it
            for job in jobs:
                job.events.put(("error", None, f"{type(err).__name__}: {err}"))


def wait_all(job: Job, timeout_s: float | None = None) -> list[Completion] | str:
    """All samples of a non-streaming job in order, or the error message."""
    out: dict[int, Completion] = {}
    while len(out) < job.request.params.n:
        kind, sample, payload = job.events.get(timeout=timeout_s)
        if kind == "error":
            return payload
        if kind == "done":
            if payload.error is not None:
                return payload.error
            out[sample] = payload
    return [out[i] for i in range(job.request.params.n)]
