"""RefineBench prompts and the checklist judge's output parser.

REIMPLEMENTATION; OFFICIAL PROMPTS UNAVAILABLE. The RefineBench evaluation code and prompt wording
could not be obtained, so every prompt here is jaxwrite's own; reports carry `PROMPT_LABEL`.

Design choices:
- Checklist judge: one call per (problem, turn) grading all items together, answering a JSON object
  {"1": "Yes" | "No", ...}. One call keeps cost at one request per turn and lets the judge see the whole
  checklist; the reference answer is shown to the judge (never to the model under test).
  Items missing from an otherwise valid answer count as unparsed for those items only.
- Self-refinement: the model either rewrites its full answer or replies with `DONE_MARKER` to declare
  it is finished (the loop then stops that problem early; any text beside the marker is ignored).
- The judge grades the answer after any `</think>` reasoning; the conversation keeps the full text.
- Guided / partial: the unmet items (all of them, or only the revealed subset) are quoted back as
  feedback; partial feedback also tells the model other problems may remain.
"""
from __future__ import annotations

import json
import re
from typing import Sequence

PROMPT_LABEL = "RefineBench prompts: reimplementation; official prompts unavailable"
DONE_MARKER = "[[REFINEMENT COMPLETE]]"

CHECKLIST_SYSTEM = (
    "You are a strict grader. You receive a problem, a reference answer, a candidate response and a "
    "numbered checklist of yes/no questions about the response. For each item answer \"Yes\" only if the "
    "response clearly satisfies it (use the reference answer to judge correctness), otherwise \"No\". "
    "Reply with a single JSON object mapping every item number (as a string) to \"Yes\" or \"No\", e.g. "
    "{\"1\": \"Yes\", \"2\": \"No\"}, and nothing else.")
CHECKLIST_USER = ("[Problem]\n{problem}\n\n[Reference answer]\n{reference}\n\n[Response]\n{response}\n\n"
                  "[Checklist]\n{items}")

SELF_REFINE = (
    "Review your previous answer carefully for errors, omissions and unclear reasoning. If you can "
    "improve it, write the complete improved answer (not only the changes). If you are confident it "
    f"needs no change, reply with exactly {DONE_MARKER} and nothing else.")
GUIDED_REFINE = ("Your previous answer does not yet meet the following requirements:\n{items}\n\n"
                 "Revise your answer so that it meets them, and write the complete improved answer.")
PARTIAL_REFINE = ("Your previous answer does not yet meet the following requirements:\n{items}\n\n"
                  "There may be other problems that are not listed. Revise your answer, and write the "
                  "complete improved answer.")
PARTIAL_UNLISTED = ("The requirements you were told about are now met, but your answer may still have "
                    "other problems. Review it carefully and write the complete improved answer.")


def _numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{k}. {item}" for k, item in enumerate(items, start=1))


def checklist_messages(problem_text: str, reference: Sequence[str], response: str,
                       checklist: Sequence[str]) -> list[dict[str, str]]:
    user = CHECKLIST_USER.format(problem=problem_text, reference="\n\n".join(reference) or "(none)",
                                 response=response, items=_numbered(checklist))
    return [{"role": "system", "content": CHECKLIST_SYSTEM}, {"role": "user", "content": user}]


def parse_checklist(text: str, n_items: int) -> list[bool | None] | None:
    """Per-item True/False (None where the item is missing), or None when no JSON object parses.

    Reasoning before `</think>` and Markdown fences are ignored; the last {...} object is used.
    """
    answer = text.rsplit("</think>", 1)[-1]
    obj = None
    for match in reversed(list(re.finditer(r"\{[^{}]*\}", answer, flags=re.S))):
        try:
            obj = json.loads(match.group(0))
            break
        except json.JSONDecodeError:
            continue
    if not isinstance(obj, dict):
        return None
    marks: list[bool | None] = []
    for k in range(1, n_items + 1):
        value = obj.get(str(k))
        value = value.strip().lower() if isinstance(value, str) else value
        marks.append(True if value in ("yes", True) else False if value in ("no", False) else None)
    return marks


def refine_message(mode: str, unmet_shown: Sequence[str]) -> str:
    """The user turn after a judged answer: no feedback (self), all unmet (guided), revealed unmet (partial)."""
    if mode == "self":
        return SELF_REFINE
    if mode == "guided":
        return GUIDED_REFINE.format(items=_numbered(unmet_shown))
    if mode == "partial":
        return PARTIAL_REFINE.format(items=_numbered(unmet_shown)) if unmet_shown else PARTIAL_UNLISTED
    raise ValueError(f"unknown refinement mode {mode!r}; expected self, guided or partial")


def answer_text(text: str) -> str:
    """What the checklist judge grades: the answer after any `</think>` reasoning."""
    return text.rsplit("</think>", 1)[-1].strip()


def declares_done(text: str) -> bool:
    """True when a self-refinement answer contains the done marker; text beside it is ignored."""
    return DONE_MARKER in answer_text(text)
