"""What every chat model speaks: a batch of `ChatRequest`s in, one `ChatResult` per request out.

A chat model is anything with `chat(requests) -> results`, a `label` and a `concurrency`. Taking a whole
batch lets the local engine fill its decode batch and lets an HTTP client fan the calls out
concurrently; callers (judges, teachers, the model under test) never care which one they have.
Requests sample with the engine's own `SamplingParams`, whichever backend answers them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence, runtime_checkable

from jaxwrite.infer.sampling import SamplingParams

# A chat request's sampling when the caller names none: the engine's defaults with a longer answer.
CHAT_SAMPLING = SamplingParams(max_new_tokens=1024)


def sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    """{temperature, top_p, top_k, max_tokens}: the settings under the chat API's names, as request
    bodies send them and output metadata records them."""
    return {"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
            "max_tokens": sampling.max_new_tokens}


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """One chat completion: `messages` are {"role", "content"} dicts, sampled as `sampling` says.

    One request is one sample (`sampling.n` must be 1). `json_schema` is a schema the output must
    follow, for models that can constrain decoding; others pass it on or ignore it.
    """
    messages: tuple[dict[str, str], ...]
    sampling: SamplingParams = CHAT_SAMPLING
    json_schema: dict[str, Any] | None = None

    def __post_init__(self):
        # Stored as a tuple so a request is hashable and cannot change while a model works on it.
        object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))
        if self.sampling.n != 1:
            raise ValueError(f"field 'sampling.n': a chat request is one sample, got {self.sampling.n}")


@dataclasses.dataclass(frozen=True)
class ChatResult:
    """The model's text, why generation stopped, and `error` (None on success) when no text came back."""
    text: str
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class ChatModel(Protocol):
    """Answers a batch of chat requests, one result per request, in order; never raises per request."""

    @property
    def label(self) -> str:
        """What produced the answers (kind + model), recorded beside every output file."""

    @property
    def concurrency(self) -> int:
        """How many requests it works on at once (HTTP calls in flight, or the engine's batch rows);
        callers size their batches from it."""

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        ...
