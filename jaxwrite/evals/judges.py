"""Judges: the chat models evaluators ask for verdicts (`jaxwrite.chat.ChatModel`; the local engine's
score_logit mode in local_judge). Evaluators build the requests and parse the verdicts; an evaluator
whose verdicts are not one 1-10 score refuses a judge that does not sample text
(`require_generating_judge`), up front.
"""
from __future__ import annotations

from jaxwrite.chat import ChatModel, describe_model
from jaxwrite.common.errors import InputError

# The error of a judgement whose answers never parsed as a verdict (failure lines and report tables).
UNPARSEABLE_VERDICT = "unparseable verdict"


def require_generating_judge(judge: ChatModel, verdict: str) -> None:
    """Raises InputError when `judge` does not sample its text (score_logit reads one 1-10 score from
    logits), since `verdict`, what the evaluator parses, could never come back."""
    mode = describe_model(judge)["mode"]
    if mode != "generate":
        raise InputError(f"judge mode {mode}: cannot produce {verdict} (it reads a single 1-10 score); "
                         "use a judge in mode generate")


__all__ = ["UNPARSEABLE_VERDICT", "require_generating_judge"]
