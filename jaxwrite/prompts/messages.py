"""The messages the official judges are asked with, built from the official templates byte for byte.

WritingBench's critic: [system, user] per (query, criterion), the user turn being the official
`str.format` template with the criterion dict itself as `{criteria}` (so it appears as Python's
`str(dict)`: single quotes, file key order, non-ASCII kept), as upstream; its answer is the verdict JSON
`{"score": s, "reason": "..."}` (`critic_verdict`, what critic SFT trains the critic to print).
LongBench-Write's quality judge: one user turn, judge.txt with $INST$ and $RESPONSE$ replaced.
"""
from __future__ import annotations

import json

from jaxwrite.prompts.official import official_prompt

CRITIC_SYSTEM = "writingbench_critic_system"
CRITIC_USER = "writingbench_critic_user"
LONGBENCH_WRITE_JUDGE = "longbench_write_judge"


def critic_messages(query: str, criterion: dict[str, str], response: str) -> list[dict[str, str]]:
    """[system, user] for one (query, criterion, response)."""
    user = official_prompt(CRITIC_USER).format(criteria=criterion, query=query, response=response)
    return [{"role": "system", "content": official_prompt(CRITIC_SYSTEM)}, {"role": "user", "content": user}]


def critic_verdict(score: int, reason: str) -> str:
    """The critic's assistant turn: the JSON the WritingBench parser accepts."""
    return json.dumps({"score": score, "reason": reason}, ensure_ascii=False)


def longbench_write_judge_messages(prompt: str, response: str) -> list[dict[str, str]]:
    """[user]: judge.txt with $INST$ and $RESPONSE$ replaced (plain string replace), as upstream."""
    text = official_prompt(LONGBENCH_WRITE_JUDGE).replace("$INST$", prompt).replace("$RESPONSE$", response)
    return [{"role": "user", "content": text}]
