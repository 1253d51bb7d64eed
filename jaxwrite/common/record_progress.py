"""A record job's progress: one tqdm bar on stderr, counting records in the job's units, resumed ones
counted as done, opened lazily (so a job with nothing to do shows nothing until it reports)."""
from __future__ import annotations

import sys
from typing import Any


class ProgressBar:
    """The bar of one job; `enabled` False keeps every call and shows nothing (another process's job)."""

    def __init__(self, desc: str, unit: str, enabled: bool):
        self.desc, self.unit, self.enabled = desc, unit, enabled
        self._bar = None

    def open(self, total: int, initial: int) -> None:
        """Shows the bar, once (later calls keep the first total)."""
        if self._bar is None:
            from tqdm import tqdm
            self._bar = tqdm(total=total, initial=initial, desc=self.desc, unit=self.unit, file=sys.stderr,
                             disable=not self.enabled)

    @property
    def opened(self) -> bool:
        return self._bar is not None

    def update(self, n: int) -> None:
        self._bar.update(n)

    def note(self, counts: dict[str, Any]) -> None:
        self._bar.set_postfix(counts)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
