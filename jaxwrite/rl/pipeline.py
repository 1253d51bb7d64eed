"""Rollouts for the trainer, synchronous or generated ahead under a staleness bound (`rl.max_staleness`).

Policy version v is the weights after v rollouts' updates. Rollout r is generated from version
max(0, r − s): with s = 0 the synchronous loop (the engine re-reads the weights, then the step waits for
its rollout); with s ≥ 1, when the trainer asks for rollout r (its weights are version r), rollouts up to
r + s are started from a copy of those weights on a worker thread, one after another, while the trainer
trains on rollout r. Which weights each rollout sees is fixed by the schedule, not by timing, so a seeded
run repeats exactly.

The engine decodes from its own copy of the weights, taken on the trainer's thread when rollouts are
started: an on-device copy when the engine shares the training mesh, a device-to-device transfer when it
has a mesh of its own (`rl.rollout_mesh`); its wall time is logged as time/weight_sync_s. The trainer's
wait for a rollout is time/rollout_wait_s (the whole rollout when synchronous, ideally ~0 when not).

A checkpoint carries the rollouts already started (get_state waits for them): they came from weights
the checkpoint no longer holds, so a resumed run takes them from the checkpoint and continues exactly.
A run whose num_steps is raised after it finished has no such rollouts past its old end; those are
generated from the weights at hand.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

from jaxwrite.rl.producer import Produced, RolloutProducer
from jaxwrite.rl.state_codec import pack_arrays, unpack_arrays

# () -> (the engine's next weights, already placed and owning their buffers; seconds it took)
WeightSync = Callable[[], tuple[Any, float]]


class RolloutPipeline:
    def __init__(self, producer: RolloutProducer, staleness: int, sync_weights: WeightSync,
                 refresh_engine: Callable[[Any], float], last_index: int):
        """sync_weights: a copy of the trainer's current weights for the engine (used when s >= 1);
        refresh_engine(weights or None): load them into the engine, None = the model's own (s = 0),
        returning the seconds it took. last_index: the run's last rollout (none is started past it)."""
        self.producer, self.staleness, self.last_index = producer, staleness, last_index
        self._sync_weights, self._refresh = sync_weights, refresh_engine
        self._done: dict[int, Produced] = {}
        self._launched = 0                        # rollouts started so far (indices 0 .. launched-1)
        self._pending = 0                         # started, not produced yet
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._jobs: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._closing = False

    # --- the trainer's side --------------------------------------------------------------------------
    def get(self, index: int) -> Produced:
        """Rollout `index`, asked for when the trainer's weights are version `index`."""
        began = time.perf_counter()
        if self.staleness == 0 and index not in self._done:
            sync = self._refresh(None)
            produced = self.producer.produce(index, index)
            produced.metrics["time/weight_sync_s"] = sync
            self._launched = max(self._launched, index + 1)
        else:
            self._launch_through(min(index + self.staleness, self.last_index), version=index)
            with self._cond:
                while index not in self._done and self._error is None:
                    self._cond.wait()
                if self._error is not None:
                    raise RuntimeError(f"rollout {index} failed on the rollout thread") from self._error
            produced = self._done[index]
        self._done.pop(index, None)
        produced.metrics["time/rollout_wait_s"] = time.perf_counter() - began
        return produced

    def _launch_through(self, last: int, version: int) -> None:
        """Starts rollouts launched..last from a copy of the current weights (policy `version`)."""
        if self._launched > last:
            return
        weights, seconds = self._sync_weights()
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="rollouts", daemon=True)
            self._worker.start()
        with self._cond:
            for index in range(self._launched, last + 1):
                self._pending += 1
                self._jobs.put((index, version, weights, seconds if index == self._launched else 0.0))
            self._launched = last + 1

    # --- the rollout thread ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stops the rollout thread once its current rollout is done (the run has ended); rollouts
        started and not begun are dropped."""
        if self._worker is not None:
            self._closing = True
            self._jobs.put(None)
            self._worker.join()
            self._worker = None

    def _work(self) -> None:
        loaded = None
        while True:
            job = self._jobs.get()
            if job is None or self._closing:
                return
            index, version, weights, sync = job
            try:
                if weights is not loaded:
                    sync += self._refresh(weights)
                    loaded = weights
                produced = self.producer.produce(index, version)
                produced.metrics["time/weight_sync_s"] = sync
            except BaseException as err:   # handed to the trainer's thread, which raises it
                with self._cond:
                    self._error = err
                    self._cond.notify_all()
                return
            with self._cond:
                self._done[index] = produced
                self._pending -= 1
                self._cond.notify_all()

    # --- checkpointable state -----------------------------------------------------------------------
    def get_state(self) -> dict:
        """The rollouts started and not yet trained on (waits for them), and the producer's state."""
        with self._cond:
            while self._pending and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise RuntimeError("a rollout failed on the rollout thread") from self._error
            done = sorted(self._done.items())
        return {"launched": self._launched, "producer": self.producer.get_state(),
                "rollouts": [{"index": i, "metrics": p.metrics, "arrays": pack_arrays(p.batch)} for i, p in done]}

    def set_state(self, state: dict) -> None:
        self._launched = int(state["launched"])
        self.producer.set_state(state["producer"])
        self._done = {int(r["index"]): Produced(int(r["index"]), unpack_arrays(r["arrays"]), dict(r["metrics"]))
                      for r in state["rollouts"]}
