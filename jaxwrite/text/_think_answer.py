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


# ----------------------------------------------------------------------------- answer extraction
# One rule for everything that shows, counts or judges a response (generate, every scorer, the
# arena), so a think/answer model is never scored with its plan included.

ANSWER_EXTRACTION_MODES = ("auto", "think_answer", "official_strip", "none")
_ANSWER_TAG = re.compile(r"</?answer>")


@dataclasses.dataclass(frozen=True)
class ExtractedAnswer:
    """What is scored of one response.

    `text` is judged and counted; it is None for a malformed think/answer response, which is never
    scored (`problems` says why). `plan` is the <think> block when one was split off. `source` is
    "answer" (the <answer> block), "stripped" (WritingBench's official cut applied), "raw" (as
    written) or "malformed".
    """

    text: str | None
    plan: str | None
    source: str
    problems: tuple[str, ...] = ()

    @property
    def malformed(self) -> bool:
        return self.text is None


def has_answer_tags(text: str) -> bool:
    """True when `text` holds an <answer> or </answer> tag: only think/answer outputs write them."""
    return _ANSWER_TAG.search(text) is not None


def resolve_answer_extraction(mode: str, texts, *, think_answer_output: bool = False) -> str:
    """The mode applied to a whole set of responses (one model's file).

    "auto" becomes "think_answer" when the set comes from a think/answer run (`think_answer_output`,
    e.g. `generate --think-answer` records) or any response holds an <answer> tag, else
    "official_strip". It is decided per file, not per response: a reasoning model's
    "<think>…</think>\\n\\ntext" must keep WritingBench's official cut, while the same text from a
    think/answer model is a response without <answer>, which only the rest of its file reveals.
    """
    if mode not in ANSWER_EXTRACTION_MODES:
        raise ValueError(f"answer extraction '{mode}': expected one of {', '.join(ANSWER_EXTRACTION_MODES)}")
    if mode != "auto":
        return mode
    return "think_answer" if think_answer_output or any(map(has_answer_tags, texts)) else "official_strip"


def extract_answer(text: str, mode: str = "auto", *, stopped_at_answer_close: bool = True,
                   think_prefilled: bool | None = None) -> ExtractedAnswer:
    """What to score of `text` under `mode` (see ANSWER_EXTRACTION_MODES):

    think_answer: the <answer> block when `parse_think_answer` finds exactly one <think> then one
      non-empty <answer>; anything else (no answer, two answers, plan only, text outside) is
      malformed, with the parser's problems, and has no text to score.
    official_strip: everything through the first "</think>\\n\\n" removed (WritingBench's rule).
    none: the text as written.
    auto: `resolve_answer_extraction` on this one text; scorers resolve over the whole file instead.

    stopped_at_answer_close defaults to True because a response file does not record the stop: the
    engine ends think/answer runs at `</answer>` and leaves it out, so a final open <answer> is whole.
    think_prefilled None: read the text as continuing a prompt that ended in <think> (base-model
    prompts) when its first tag is </think>.
    """
    mode = resolve_answer_extraction(mode, (text,))
    if mode == "none":
        return ExtractedAnswer(text, None, "raw")
    if mode == "official_strip":
        cut = THINK_CLOSE + "\n\n" in text
        return ExtractedAnswer(strip_think_for_judge(text), None, "stripped" if cut else "raw")
    if think_prefilled is None:
        first = _TAG.search(text)
        think_prefilled = first is not None and first.group(0) == THINK_CLOSE
    parsed = parse_think_answer(text, stopped_at_answer_close=stopped_at_answer_close,
                                think_prefilled=think_prefilled)
    if parsed.well_formed:
        return ExtractedAnswer(parsed.answer, parsed.plan, "answer")
    return ExtractedAnswer(None, parsed.plan, "malformed", tuple(parsed.problems))


def think_answer_fields(samples, single: bool, think_prefilled: bool = False) -> dict:
    """The think/answer fields of one output line (`generate --think-answer`, the quickstart): the answer
    as `response`, the plan, the full text and the structure verdict, by `extract_answer` with the stop
    each sample (anything with `.text` and `.matched_stop`) actually met. think_prefilled: the prompt
    ended with <think> (`think_answer_base_prompt`)."""
    rows = []
    for s in samples:
        got = extract_answer(s.text, "think_answer", stopped_at_answer_close=s.matched_stop == STOP_STRING,
                             think_prefilled=think_prefilled)
        # A malformed output keeps its raw text: the scorers see well_formed false and count it as
        # malformed rather than scoring it; nothing here passes a partial answer off as the answer.
        rows.append({"response": s.text if got.malformed else got.text, "plan": got.plan,
                     "raw_response": s.text, "well_formed": not got.malformed, "problems": list(got.problems)})
    if single:
        return rows[0]
    plural = {"response": "responses", "plan": "plans", "raw_response": "raw_responses"}
    out = {plural.get(k, k): [r[k] for r in rows] for k in rows[0]}
    # The older field, kept for readers of earlier files; None = malformed.
    out["answers"] = [r["response"] if r["well_formed"] else None for r in rows]
    return out
