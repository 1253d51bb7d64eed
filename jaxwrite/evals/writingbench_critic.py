"""The WritingBench critic call, byte for byte as the official evaluator builds and parses it."""
from __future__ import annotations

import dataclasses
import json

from jaxwrite.chat import ChatRequest, SamplingParams
from jaxwrite.evals.official_prompts import official_prompt

# Official critic sampling: temperature 1.0, top_p 0.95, no top_k, up to 2,048 new tokens.
CRITIC_SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, top_k=None, max_new_tokens=2048)
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                   "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


def critic_messages(query: str, criterion: dict[str, str], response: str) -> list[dict[str, str]]:
    """[system, user] for one (query, criterion). The criterion dict itself fills `{criteria}`, so it
    appears as Python's `str(dict)` (single quotes, file key order, non-ASCII kept), as upstream."""
    user = official_prompt("writingbench_critic_user").format(criteria=criterion, query=query,
                                                              response=response)
    return [{"role": "system", "content": official_prompt("writingbench_critic_system")},
            {"role": "user", "content": user}]


def critic_request(query: str, criterion: dict[str, str], response: str, seed: int | None,
                   constrain_json: bool = False) -> ChatRequest:
    """One judge request with the official sampling. `constrain_json` asks a capable judge for schema-
    constrained output; it changes the metric, so the caller records it."""
    return ChatRequest(messages=tuple(critic_messages(query, criterion, response)),
                       sampling=dataclasses.replace(CRITIC_SAMPLING, seed=seed),
                       json_schema=VERDICT_SCHEMA if constrain_json else None)


def parse_critic_output(text: str) -> tuple[int, str] | None:
    """(score 1..10, reason) from the critic's text, or None when the verdict is invalid.

    As upstream: strip the character set `json|\\`` from both ends, then `json.loads`. A score must be
    an int or an integral float (a bool or a string is rejected); never `eval` the text.
    """
    try:
        verdict = json.loads(text.strip("json|```"))  # noqa: B005 (a character set, as upstream strips)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(verdict, dict):
        return None
    score, reason = verdict.get("score"), verdict.get("reason")
    if isinstance(score, bool) or not isinstance(reason, str):
        return None
    if isinstance(score, float):
        if not score.is_integer():
            return None
        score = int(score)
    if not isinstance(score, int) or not 1 <= score <= 10:
        return None
    return score, reason
