"""The judge interface every evaluator talks to: a batch of chat requests in, one result per request out.

A judge is anything with `chat(requests) -> results` and a `label`. Taking a whole batch lets a local
engine fill its decode batch and lets an HTTP judge fan the calls out concurrently; the evaluators
never care which one they have. Judges are built by kind from `JUDGES` ("http" here; the inference
engine registers "local").
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from jaxwrite.common.registry import Registry


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """One chat completion: `messages` are {"role", "content"} dicts; `None` switches a knob off."""
    messages: tuple[dict[str, str], ...]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 1024
    seed: int | None = None
    # A JSON schema the output must follow, for judges that can constrain decoding; others ignore it.
    json_schema: dict[str, Any] | None = None

    def __post_init__(self):
        # Stored as a tuple so a request is hashable and cannot change while a judge works on it.
        object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))


@dataclasses.dataclass(frozen=True)
class ChatResult:
    """The judge's text, why generation stopped, and `error` (None on success) when no text came back."""
    text: str
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class Judge(Protocol):
    """Answers a batch of chat requests, one result per request, in order; never raises per request."""

    @property
    def label(self) -> str:
        """What produced the verdicts (kind + model), recorded beside every score file."""

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        ...


JUDGES: Registry[Callable[..., Judge]] = Registry("judge")


def make_judge(kind: str, **kwargs: Any) -> Judge:
    """Builds a judge by registered kind, e.g. `make_judge("http", base_url=..., model=...)`."""
    return JUDGES.get(kind)(**kwargs)
