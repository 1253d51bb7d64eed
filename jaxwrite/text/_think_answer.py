"""The `<think>`/`<answer>` protocol of LongWriter-Zero: plan inside <think>…</think>, then write the
final text inside <answer>…</answer>; generation stops at `</answer>` and only the answer is shown
and scored.

The instruction wording below is jaxwrite's own (the paper's exact prompt is not reproduced); the
structure it asks for is the paper's.
"""
from __future__ import annotations

import dataclasses
import re

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
STOP_STRING = ANSWER_CLOSE  # the engine stops here and leaves the stop text out of the output

# jaxwrite's own wording (not LongWriter-Zero's).
_INSTRUCTIONS = {
    "en": ("Complete the writing task below in two stages. First plan inside <think> and </think>: work "
           "out what the task asks for (topic, purpose, readers, tone, form and length), sketch the "
           "structure, and decide what each part will say. Then write the complete final text inside "
           "<answer> and </answer>. Write nothing outside these two blocks; the reader sees only the "
           "text inside <answer>."),
    "zh": ("请分两步完成下面的写作任务。先在 <think> 与 </think> 之间构思：弄清任务要求（主题、目的、读者、"
           "语气、体裁和篇幅），拟出结构提纲，想好每一部分写什么。然后在 <answer> 与 </answer> 之间写出"
           "完整的最终文本。两个部分之外不要输出任何内容；读者只会看到 <answer> 中的文字。"),
}
_TASK_LABEL = {"en": "Writing task:", "zh": "写作任务："}


def _instruction(lang: str) -> str:
    if lang not in _INSTRUCTIONS:
        raise ValueError(f"language '{lang}': expected one of {', '.join(_INSTRUCTIONS)}")
    return _INSTRUCTIONS[lang]


def think_answer_user_turn(query: str, lang: str = "en") -> str:
    """The user-turn text for a chat model: the protocol instruction, then the task."""
    return f"{_instruction(lang)}\n\n{_TASK_LABEL[lang]}\n{query}"


def think_answer_messages(query: str, lang: str = "en") -> list[dict]:
    """One user message, for `Tokenizer.apply_chat_template`."""
    return [{"role": "user", "content": think_answer_user_turn(query, lang)}]


def think_answer_base_prompt(query: str, lang: str = "en") -> str:
    """A plain prompt for a base model (LongWriter-Zero starts RL from one): the instruction, a
    `User: … Assistant:` exchange, and an opened <think> so the continuation starts planning.
    Parse its output with `parse_think_answer(..., think_prefilled=True)`."""
    return f"{_instruction(lang)}\n\nUser: {query}\nAssistant: {THINK_OPEN}"


@dataclasses.dataclass(frozen=True)
class ThinkAnswer:
    """A response split into plan and answer (each stripped of surrounding whitespace).

    `plan` is the first <think> block, `answer` the first <answer> block (None when absent);
    `problems` names every departure from exactly one <think> followed by one non-empty <answer>
    with nothing outside them; `well_formed` is True when there are none.
    """

    plan: str | None
    answer: str | None
    well_formed: bool
    problems: list[str]


_TAG = re.compile(r"</?(think|answer)>")


def parse_think_answer(text: str, *, stopped_at_answer_close: bool = False,
                       think_prefilled: bool = False) -> ThinkAnswer:
    """Splits a response into plan and answer and reports malformed structure.

    stopped_at_answer_close: generation ended at the `</answer>` stop string, which the engine
      leaves out, so an answer still open at the end of the text is complete.
    think_prefilled: the prompt ended with `<think>` (see `think_answer_base_prompt`), so the text
      starts inside the think block.
    """
    if think_prefilled:
        text = THINK_OPEN + text
    problems: list[str] = []
    blocks: list[tuple[str, str]] = []   # (kind, content) in order of appearance
    open_kind, open_end, pos = None, 0, 0
    for match in _TAG.finditer(text):
        kind, closing = match.group(1), match.group(0).startswith("</")
        if open_kind is None:
            if closing:
                problems.append(f"</{kind}> without an opening <{kind}>")
            else:
                if text[pos:match.start()].strip():
                    problems.append(f"text outside blocks before <{kind}>")
                open_kind, open_end = kind, match.end()
        elif closing and kind == open_kind:
            blocks.append((kind, text[open_end:match.start()]))
            open_kind = None
        else:
            problems.append(f"{match.group(0)} inside <{open_kind}>")
        pos = match.end()
    if open_kind is not None:
        blocks.append((open_kind, text[open_end:]))
        if not (open_kind == "answer" and stopped_at_answer_close):
            problems.append(f"<{open_kind}> not closed")
    elif text[pos:].strip():
        problems.append("text outside blocks" + (" after the last block" if blocks else ""))

    kinds = [kind for kind, _ in blocks]
    for kind in ("think", "answer"):
        if kinds.count(kind) == 0:
            problems.append(f"no <{kind}> block")
        elif kinds.count(kind) > 1:
            problems.append(f"{kinds.count(kind)} <{kind}> blocks")
    if "think" in kinds and "answer" in kinds and kinds.index("answer") < kinds.index("think"):
        problems.append("<answer> before <think>")
    plan = next((content.strip() for kind, content in blocks if kind == "think"), None)
    answer = next((content.strip() for kind, content in blocks if kind == "answer"), None)
    if plan == "":
        problems.append("empty <think>")
    if answer == "":
        problems.append("empty <answer>")
    return ThinkAnswer(plan=plan, answer=answer, well_formed=not problems, problems=problems)


def strip_think_for_judge(response: str) -> str:
    """WritingBench's rule before judging: drop everything up to and including the first
    "</think>\\n\\n"; nothing is removed when it does not occur."""
    marker = THINK_CLOSE + "\n\n"
    cut = response.find(marker)
    return response if cut < 0 else response[cut + len(marker):]
