"""The layer every model call of `eval` and `prep` passes through: the call cache and the usage meter.

    judge = MeteredChatModel(model, cache=CallCache(path), prices=Prices(3.0, 15.0))
    judge.chat(requests)                 # hits from the cache, the rest asked of `model` in one batch
    judge.usage_dict()                   # requests, tokens, wall time, rates, hits / misses, cost

It is itself a chat model (label, concurrency, describe, identity are the wrapped model's), so callers do
not know it is there. `metered(model)` wraps a model once (an evaluator called from Python gets a meter
with no cache). Within one batch, requests with the same key are asked once. `reject(requests)` (called
by `ask_until_valid` for answers its check turned down) keeps those answers from being served again.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from jaxwrite.chat.cache import CallCache, cacheable, request_key
from jaxwrite.chat.interface import ChatModel, ChatRequest, ChatResult, model_identity
from jaxwrite.chat.usage import Prices, Usage


class MeteredChatModel:
    """A chat model with the call cache in front (None: no cache) and its calls counted (`usage`)."""

    def __init__(self, model: ChatModel, cache: CallCache | None = None, prices: Prices | None = None):
        self.model = model
        self.cache = cache
        self.prices = prices
        self.usage = Usage()
        self._identity: dict[str, Any] | None = None

    # --- the wrapped model's faces --------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self.model.label

    @property
    def concurrency(self) -> int:
        return self.model.concurrency

    def describe(self) -> dict[str, Any]:
        from jaxwrite.chat.interface import describe_model
        return describe_model(self.model)

    def identity(self) -> dict[str, Any] | None:
        if self._identity is None:
            self._identity = model_identity(self.model)
        return self._identity

    def __getattr__(self, name: str):   # engine, name, mode, ... of the wrapped model
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    # --- calls ------------------------------------------------------------------------------------------
    def _keys(self, requests: Sequence[ChatRequest]) -> list[str | None]:
        identity = self.identity() if self.cache is not None else None
        if identity is None:
            return [None] * len(requests)
        return [request_key(identity, r) if cacheable(r) else None for r in requests]

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        keys = self._keys(requests)
        found = self.cache.get(k for k in keys if k is not None) if self.cache is not None else {}
        results: list[ChatResult | None] = [None] * len(requests)
        ask: list[int] = []            # positions asked of the model
        first: dict[str, int] = {}     # key -> position asked for it (same key in one batch: asked once)
        copies: list[tuple[int, int]] = []
        for i, key in enumerate(keys):
            if key is not None and key in found:
                results[i] = found[key]
                self.usage.count_hit(found[key])
            elif key is not None and key in first:
                copies.append((i, first[key]))
            else:
                if key is not None:
                    first[key] = i
                ask.append(i)
        self.usage.cache_misses += len(first)
        self.usage.uncacheable += sum(1 for i in ask if keys[i] is None) if self.cache is not None else 0
        if ask:
            began = time.perf_counter()
            answers = self.model.chat([requests[i] for i in ask])
            wall = time.perf_counter() - began
            self.usage.count_asked(answers, wall)
            for i, answer in zip(ask, answers):
                results[i] = answer
            if self.cache is not None:
                share = wall / len(ask)
                self.cache.put([(keys[i], results[i], share, self.identity()) for i in ask if keys[i] is not None])
        for i, source in copies:
            results[i] = results[source]
            if results[source].ok:
                self.usage.count_hit(results[source])
        return results

    def reject(self, requests: Sequence[ChatRequest]) -> None:
        """Answers to these requests were turned down by the caller: not served from the cache again."""
        if self.cache is not None:
            self.cache.reject(k for k in self._keys(requests) if k is not None)

    def usage_dict(self, usage: Usage | None = None) -> dict[str, Any]:
        """`usage` (default: everything this model was asked) as reports carry it."""
        return (usage or self.usage).to_dict(self.prices, str(self.cache.path) if self.cache is not None else None)


def metered(model: ChatModel) -> MeteredChatModel:
    """`model` itself when it is metered already (the CLI wraps every role with its cache), else a meter
    around it with no cache."""
    return model if isinstance(model, MeteredChatModel) else MeteredChatModel(model)


def reject_answers(model: Any, requests: Sequence[ChatRequest]) -> None:
    """Tells a metered model which answers its caller turned down (nothing for other models)."""
    reject = getattr(model, "reject", None)
    if callable(reject) and requests:
        reject(requests)
