"""Where the engine's continuous batching takes requests from: a fixed list, or anything that can
hand out requests as rows free up (the server's queue, see batcher.py)."""
from __future__ import annotations

from typing import Protocol, Sequence, TYPE_CHECKING

if TYPE_CHECKING:
    from jaxwrite.infer.requests import GenerationRequest


def rows_of(request: "GenerationRequest") -> int:
    """Sample rows a request occupies (invalid n still counts one: it is rejected, not run)."""
    return max(1, int(request.params.n)) if isinstance(request.params.n, int) else 1


def fits(used: int, need: int, rows: int, wait: bool, first: bool) -> bool:
    """Whether a request needing `need` rows joins a take() that has handed out `used` of `rows`: it
    must fit, except the first request of an idle engine's take (wait), which runs even if larger."""
    return used + need <= rows or (wait and first)


class RequestFeed(Protocol):
    def take(self, rows: int, wait: bool) -> "list[tuple[int, GenerationRequest]] | None":
        """New (request_index, request) pairs needing at most `rows` sample rows, oldest first.

        wait=True means the engine is idle: block until at least one request is available, and hand
        out a first request even if it alone needs more than `rows`. None: no request will ever come.
        """

    # Optional: `cancelled() -> Collection[int]`, the request indices handed out whose samples should stop
    # (each reported once). The engine asks at every decode-chunk boundary; see Engine.serve.


class ListFeed:
    """Hands out a fixed list in order (indices are list positions); never skips ahead of a request
    that does not fit."""

    def __init__(self, requests: Sequence["GenerationRequest"]):
        self._requests = list(requests)
        self._next = 0

    def take(self, rows: int, wait: bool) -> "list[tuple[int, GenerationRequest]] | None":
        if self._next >= len(self._requests):
            return None
        out, used = [], 0
        while self._next < len(self._requests):
            need = rows_of(self._requests[self._next])
            if not fits(used, need, rows, wait, first=not out):
                break
            out.append((self._next, self._requests[self._next]))
            used += need
            self._next += 1
        return out
