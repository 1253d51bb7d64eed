"""Background batching for the server: requests from many connections share one running engine batch.

Callers `submit` a request and read events from its job. One worker thread owns the engine and runs
`Engine.serve` over a queue-backed feed: when the engine is idle the feed blocks for a request and
gathers more for `gather_s` (a few ms); while it decodes, requests that arrive join the batch between
decode chunks (continuous batching), as many as there are free rows.

`Job.cancel()` (the client left) drops a job still waiting, or has the engine end its samples at the
next chunk boundary, which frees its rows for the requests behind it.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time

from jaxwrite.infer.engine import Engine
from jaxwrite.infer.requests import Completion, FinishReason, GenerationRequest
from jaxwrite.infer.feeds import fits, rows_of


class Job:
    """One submitted request; `events` receives ("delta", sample_index, text), ("done", sample_index,
    Completion) or ("error", None, message). `events` is anything with `put(event)`: a queue.Queue by
    default (read it with `wait_all`), or the server's bridge into its event loop."""

    def __init__(self, request: GenerationRequest, stream: bool, events=None):
        self.request = request
        self.stream = stream
        self.events = events if events is not None else queue.Queue()
        self.pending = rows_of(request)     # samples not yet delivered
        self.cancelled = False
        self._feed: "_QueueFeed | None" = None
        self._index: int | None = None      # the engine's request index once handed out

    def cancel(self) -> None:
        """Stops the job: dropped if still waiting, else its samples end at the next chunk boundary.
        Thread-safe; idempotent."""
        if self._feed is not None:
            self._feed.cancel(self)
        else:
            self.cancelled = True


class _QueueFeed:
    """The engine's request feed over the batcher's queue. Jobs it hands out stay in `active` (by
    request index) until every sample is delivered; a job that does not fit waits in `_held`."""

    def __init__(self, waiting: "queue.Queue[Job | None]", gather_s: float):
        self._waiting = waiting
        self._gather_s = gather_s
        self._held: Job | None = None
        self._ids = itertools.count()
        self._lock = threading.Lock()        # guards cancellation state shared with the callers' threads
        self._to_cancel: set[int] = set()
        self.closed = False
        self.active: dict[int, Job] = {}
        self.admissions = 0      # take() calls that handed out at least one job
        self.largest = 0         # most jobs handed out by one take()
        self.dropped = 0         # jobs cancelled before the engine saw them

    def cancel(self, job: Job) -> None:
        with self._lock:
            job.cancelled = True
            if job._index is not None:
                self._to_cancel.add(job._index)

    def cancelled(self) -> set[int]:
        """Request indices cancelled since the last call (asked by the engine between chunks)."""
        with self._lock:
            out, self._to_cancel = self._to_cancel, set()
        return out

    def _next(self, timeout: float | None) -> Job | None:
        """The next job (held one first); None when none comes in time or the batcher is closing.
        Jobs cancelled while they waited are dropped here."""
        while True:
            if self._held is not None:
                job, self._held = self._held, None
            elif self.closed:
                return None
            else:
                try:
                    job = self._waiting.get(timeout=timeout) if timeout != 0 else self._waiting.get_nowait()
                except queue.Empty:
                    return None
                if job is None:
                    self.closed = True
                    return None
            with self._lock:
                if not job.cancelled:
                    return job
            self.dropped += 1

    def take(self, rows: int, wait: bool):
        jobs: list[Job] = []
        used = 0
        deadline = None
        while True:
            if wait and not jobs:
                timeout = None                                        # idle: block for the first
            elif wait:
                deadline = deadline or time.monotonic() + self._gather_s
                timeout = max(0.0, deadline - time.monotonic())
            else:
                timeout = 0                                           # decoding: only what is queued
            job = self._next(timeout)
            if job is None:
                break
            need = rows_of(job.request)
            if not fits(used, need, rows, wait, first=not jobs):
                self._held = job
                break
            jobs.append(job)
            used += need
            if used >= rows:
                break
        if not jobs:
            return None if self.closed and self._held is None else []
        self.admissions += 1
        self.largest = max(self.largest, len(jobs))
        out = []
        for job in jobs:
            index = next(self._ids)
            with self._lock:
                job._index = index
                if job.cancelled:            # cancelled between _next and here: the engine ends it
                    self._to_cancel.add(index)
            self.active[index] = job
            out.append((index, job.request))
        return out


class Batcher:
    def __init__(self, engine: Engine, gather_s: float = 0.005):
        self.engine = engine
        self._waiting: queue.Queue[Job | None] = queue.Queue()
        self._feed = _QueueFeed(self._waiting, gather_s)
        self._cancelled_running = 0
        self._thread = threading.Thread(target=self._loop, name="jaxwrite-batcher", daemon=True)
        self._thread.start()

    @property
    def admissions(self) -> int:
        return self._feed.admissions

    @property
    def largest_batch(self) -> int:
        return self._feed.largest

    @property
    def cancelled_jobs(self) -> int:
        """Jobs cancelled before admission (dropped) or while running (samples ended early)."""
        return self._feed.dropped + self._cancelled_running

    def live_jobs(self) -> int:
        """Jobs the engine holds now (admitted, not finished)."""
        return len(self._feed.active)

    def submit(self, request: GenerationRequest, stream: bool = False, events=None) -> Job:
        job = Job(request, stream, events)
        job._feed = self._feed
        self._waiting.put(job)
        return job

    def close(self) -> None:
        self._waiting.put(None)
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        feed = self._feed

        def on_text(index: int, sample: int, delta: str) -> None:
            job = feed.active.get(index)
            if job is not None and job.stream and not job.cancelled:
                job.events.put(("delta", sample, delta))

        while not feed.closed or feed.active:
            try:
                for completion in self.engine.serve(feed, on_text=on_text):
                    job = feed.active.get(completion.request_index)
                    if job is None:
                        continue
                    if completion.finish_reason == FinishReason.CANCELLED:
                        self._cancelled_running += job.pending == rows_of(job.request)
                    job.events.put(("done", completion.sample_index, completion))
                    job.pending -= 1
                    if job.pending <= 0 or completion.error is not None:
                        del feed.active[completion.request_index]
                return
            except Exception as err:  # the engine failed mid-batch: every job in it hears; serving goes on
                for job in feed.active.values():
                    job.events.put(("error", None, f"{type(err).__name__}: {err}"))
                feed.active.clear()


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
