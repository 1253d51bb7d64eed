"""A chat model run in process by jaxwrite's own inference engine (no HTTP).

Each request's messages go through the model's chat template; its `SamplingParams` and JSON schema
(enforced by constrained decoding) go to the engine unchanged, and the whole batch is decoded together.
The engine refuses a request only for what the request itself is (too long for the context, a bad
setting, a template that fails): the same request fails again, so those errors are not retryable.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from jaxwrite.chat.interface import ChatRequest, ChatResult
from jaxwrite.infer import Engine, GenerationRequest, load_for_inference


class LocalChatModel:
    """Chat model backed by an `Engine`; pass `engine=` or `model=DIR` (HF dir or jaxwrite checkpoint)."""

    def __init__(self, engine: Engine | None = None, model: str | None = None, max_batch: int = 32,
                 name: str | None = None):
        if engine is None:
            if model is None:
                raise ValueError(f"{type(self).__name__} needs engine= or model=DIR")
            loaded, tokenizer = load_for_inference(model)
            engine = Engine(loaded, tokenizer, max_batch=max_batch)
        self.engine = engine
        self.name = name or model or "in-process model"
        self._identity: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"local:{self.name}"

    @property
    def concurrency(self) -> int:
        """The engine's batch rows: a caller's batch of this many requests decodes together."""
        return self.engine.max_batch

    def describe(self) -> dict[str, Any]:
        """The engine samples each verdict's text as the request says: the official way."""
        return {"label": self.label, "transport": "local", "mode": "generate", "official": True,
                "settings": {"model": self.name, "max_context": self.engine.max_context}}

    def identity(self) -> dict[str, Any]:
        """The call cache's name for this model: digests of its weights and tokenizer (computed once)."""
        if self._identity is None:
            from jaxwrite.chat.identity import tokenizer_digest, weights_digest
            self._identity = {"transport": "local", "weights": weights_digest(self.engine.model),
                              "tokenizer": tokenizer_digest(self.engine.tokenizer)}
        return dict(self._identity)

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        results: list[ChatResult | None] = [None] * len(requests)
        prompts: dict[int, list[int]] = {}
        for i, req in enumerate(requests):
            try:
                prompts[i] = self.prompt_ids(req)
            except Exception as err:  # a template error belongs to this request only
                results[i] = ChatResult(text="", error=f"{type(err).__name__}: {err}", retryable=False)
        for i, result in self.answer(requests, prompts):
            results[i] = result
        return results

    def prompt_ids(self, request: ChatRequest) -> list[int]:
        """The token ids the engine is prompted with for one request."""
        return self.engine.tokenizer.encode_chat([dict(m) for m in request.messages])

    def answer(self, requests: Sequence[ChatRequest], prompts: dict[int, list[int]]
               ) -> Iterator[tuple[int, ChatResult]]:
        """(request position, result) for every request with a prompt, in the order they finish."""
        todo = list(prompts)
        if not todo:
            return
        gen = [GenerationRequest(prompts[i], requests[i].sampling, requests[i].json_schema) for i in todo]
        for completion in self.engine.stream(gen):
            i = todo[completion.request_index]
            if completion.error is not None:
                yield i, ChatResult(text="", error=completion.error, retryable=False)
            else:
                yield i, ChatResult(text=completion.text, finish_reason=completion.finish_reason,
                                    prompt_tokens=completion.prompt_tokens,
                                    completion_tokens=len(completion.token_ids))
