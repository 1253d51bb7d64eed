"""Why records a job tried were not done, told apart by kind, so the closing summary gives the right
advice: a "permanent" failure (a judge server's 4xx, a prompt too long for the context) fails the same
way on a re-run, so it is reported with its message and what to change, never with advice to re-run; a
"transient" one (timeouts, 5xx, dropped connections) with the advice to re-run; an "unparseable" one
(answers came, none valid, re-sampled up to the attempt limit) as what it is: a re-run samples again and
may or may not get a valid one."""
from __future__ import annotations

# Why a record tried was not done: the request fails the same way again ("permanent": a 4xx, a prompt
# too long for the context), may pass later ("transient": a timeout, a 5xx), or got answers of which
# none parsed ("unparseable", after re-sampling up to the attempt limit).
FAILURE_KINDS = ("permanent", "transient", "unparseable")

_ADVICE = {
    "permanent": ("failed with a permanent error", "a re-run fails the same way: change the request or "
                  "the model/server, e.g. its context length"),
    "transient": ("failed with a transient error (timeout, 5xx, dropped connection)", "re-run to retry them"),
    "unparseable": ("got no parseable answer, re-sampled up to the attempt limit",
                    "a re-run samples again and may or may not get one"),
}


class FailureTally:
    """Failures given an error, by kind: how many, and the first message of each kind."""

    def __init__(self):
        self._errors: dict[str, list] = {kind: [0, None] for kind in FAILURE_KINDS}

    def add(self, error: str, kind: str) -> None:
        if kind not in FAILURE_KINDS:
            raise ValueError(f"kind: expected one of {FAILURE_KINDS}, got {kind!r}")
        tally = self._errors[kind]
        tally[0] += 1
        tally[1] = tally[1] or error

    @property
    def by_kind(self) -> dict[str, int]:
        """{kind: failures of that kind}, for every kind of FAILURE_KINDS."""
        return {kind: count for kind, (count, _) in self._errors.items()}

    def summary(self, unit: str, see: str = "") -> list[str]:
        """One line per kind with failures: its count of `unit`s, its first message, what to do."""
        lines = []
        for kind in FAILURE_KINDS:
            count, first = self._errors[kind]
            if count:
                what, todo = _ADVICE[kind]
                lines.append(f"{count} {unit}(s) {what}, first: {first} ({todo}{see})")
        return lines
