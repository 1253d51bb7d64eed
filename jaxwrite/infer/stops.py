"""Stop strings on incrementally decoded text, and how much text is safe to stream."""
from __future__ import annotations

from typing import Sequence

_INCOMPLETE = "\ufffd"


def find_stop(text: str, stops: Sequence[str], searched: int) -> tuple[int, str | None]:
    """Index of the earliest stop string in `text`, looking only where a new match can start.

    `searched` is the text length at the previous check; a match must end after it, so the search
    starts `len(stop) - 1` characters earlier. Returns (index, stop string), (-1, None) when none.
    """
    best, which = -1, None
    for stop in stops:
        at = text.find(stop, max(0, searched - len(stop) + 1))
        if at >= 0 and (best < 0 or at < best):
            best, which = at, stop
    return best, which


def safe_length(text: str, stops: Sequence[str]) -> int:
    """Length of the prefix of `text` that can be streamed: no partial UTF-8 character at the end,
    and no suffix that could still grow into a stop string."""
    end = len(text)
    while end and text[end - 1] == _INCOMPLETE:
        end -= 1
    hold = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, end), 0, -1):
            if text.endswith(stop[:k], 0, end):
                hold = max(hold, k)
                break
    return end - hold
