"""What every chat model speaks: a batch of `ChatRequest`s in, one `ChatResult` per request out.

A chat model is anything with `chat(requests) -> results`, a `label`, a `concurrency` and `describe()`.
Taking a whole batch lets the local engine fill its decode batch and lets an HTTP client fan the calls
out concurrently; callers (judges, teachers, the model under test) never care which one they have.
Requests sample with the engine's own `SamplingParams`, whichever backend answers them.

A failed request's `ChatResult` says whether asking again can help (`retryable`): a timeout, a 5xx or
a dropped connection may pass; a 4xx or an engine's refusal (a prompt too long for the context) fails
the same way every time, so callers neither re-ask it nor advise a re-run.
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
    """The model's text, why generation stopped, and `error` (None on success) when no text came back.

    `retryable` qualifies an error: True (transient: asking again may succeed) unless the model knows
    the same request fails the same way (permanent: a 4xx answer, a prompt the engine refuses).
    Models that do not say are taken as transient, the behaviour every error had before.

    `prompt_tokens` / `completion_tokens` are the model's own counts (an endpoint's `usage`, the engine's
    token ids), None where it reports none; `cached` marks an answer served from the call cache
    (`jaxwrite.chat.cache`), for which no model was asked.
    """
    text: str
    finish_reason: str | None = None
    error: str | None = None
    retryable: bool = True
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def permanent(self) -> bool:
        """An error that asking again with the same request cannot fix."""
        return self.error is not None and not self.retryable

    @property
    def failure_kind(self) -> str:
        """Why this result left its request undone, as `RecordJob.fail` counts it: "permanent" (an
        error asking again cannot fix), "transient" (an error that may pass later), or "unparseable"
        (text came back, but not what the caller could read)."""
        return "permanent" if self.permanent else "transient" if self.error is not None else "unparseable"


def describe_model(model: Any, sampling: SamplingParams | None = None,
                   attempts: int | None = None) -> dict[str, Any]:
    """`model.describe()` as one evaluator uses it: in "generate" mode the `sampling` the evaluator
    sends and its `attempts` per item join the settings; other modes ignore them (they do not apply).

    Chat models without `describe` (a caller's own) are described from their label as generating.
    """
    if hasattr(model, "describe"):
        info = model.describe()
    else:
        info = {"label": model.label, "transport": "unknown", "mode": "generate", "official": True,
                "settings": {}}
    info = dict(info, settings=dict(info.get("settings", {})))
    if info["mode"] == "generate":
        if sampling is not None:
            info["settings"].update(sampling_fields(sampling))
            if sampling.seed is not None:
                info["settings"]["seed"] = sampling.seed
        if attempts is not None:
            info["settings"]["attempts"] = attempts
    return info


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

    def describe(self) -> dict[str, Any]:
        """JSON-ready account of who answers and how, for metadata and reports: {"label", "transport"
        ("http" | "local"), "mode" ("generate" | "score_logit"), "official" (True only for "generate":
        the official evaluators sample the judge's text), "settings" (only those that apply in the mode)}.
        """

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        ...


def model_identity(model: Any) -> dict[str, Any] | None:
    """Who answers, as far as it decides the answers, for the call cache's keys: an endpoint's URL and
    served name, a local model's weights and tokenizer digests (`identity()` of the chat models); None
    for a model that cannot say (its calls are never cached)."""
    identity = getattr(model, "identity", None)
    return identity() if callable(identity) else None
