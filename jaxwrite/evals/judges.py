"""Judges: the chat models evaluators ask for verdicts, built by kind from `JUDGES`.

A judge is any `jaxwrite.chat.ChatModel`; evaluators build its requests and parse its verdicts. Kinds:
"http" (an OpenAI-compatible endpoint) here, "local" (the in-process engine, with the non-official
score_logit mode) in local_judge. `Judge` and `HttpJudge` are the names these types had before
`jaxwrite.chat` existed, kept as aliases for users' code. An evaluator whose verdicts are not one 1-10
score refuses a judge that does not sample text (`require_generating_judge`), up front.
"""
from __future__ import annotations

from typing import Any, Callable

from jaxwrite.chat import ChatModel, ChatRequest, ChatResult, HttpChatModel, describe_model
from jaxwrite.common.errors import InputError
from jaxwrite.common.registry import Registry

Judge = ChatModel          # alias: a judge is a chat model asked for verdicts
HttpJudge = HttpChatModel  # alias: the HTTP chat model

JUDGES: Registry[Callable[..., ChatModel]] = Registry("judge")
JUDGES.register("http")(HttpChatModel)


def make_judge(kind: str, **kwargs: Any) -> ChatModel:
    """Builds a judge by registered kind, e.g. `make_judge("http", base_url=..., model=...)`."""
    return JUDGES.get(kind)(**kwargs)


def require_generating_judge(judge: ChatModel, verdict: str) -> None:
    """Raises InputError when `judge` does not sample its text (score_logit reads one 1-10 score from
    logits), since `verdict`, what the evaluator parses, could never come back."""
    mode = describe_model(judge)["mode"]
    if mode != "generate":
        raise InputError(f"judge mode {mode}: cannot produce {verdict} (it reads a single 1-10 score); "
                         "use a judge in mode generate")


__all__ = ["JUDGES", "ChatRequest", "ChatResult", "HttpJudge", "Judge", "make_judge", "require_generating_judge"]
