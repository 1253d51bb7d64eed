"""Chat-formatted SFT data with the loss on the assistant turn only: critic SFT and writer SFT.

Masking: the prompt is rendered with the tokenizer's chat template and a generation prompt; the full
conversation (prompt + assistant turn) is rendered without one, and the assistant part is the text the
full rendering adds after the prompt. The two parts are tokenised separately so the boundary is exact.
The loss covers the assistant part up to and including its first end-of-turn token (one of
`tokenizer.eos_ids`); what a template prints after it (e.g. Qwen's trailing newline) is not trained.
A template that emits no end-of-turn token gets `eos_ids[0]` appended and trained.

Critic SFT files come in two formats, told apart per file by its first record (one format a file):
  * verdicts `{query, response, criterion, score, reason}` (`jaxwrite data critic-data`'s train.jsonl):
    the messages are WritingBench's critic [system, user] pair (`jaxwrite.prompts.critic_messages`, the
    official templates), and the assistant turn is `{"score": s, "reason": "..."}`. The response is used
    as given in the record (no `</think>` stripping: the records are the critic's inputs as they should
    be seen).
  * rendered `{messages: [..., user, assistant]}` (`jaxwrite data critic-sft` output, critic-data's
    `*.messages.jsonl`): trained as given, loss on the last (assistant) turn. The contamination guard
    reads the query back out of the user turn through the same critic template.
The critic prompts are the official ones bundled with jaxwrite (`jaxwrite.prompts`), the same the
evaluator asks the critic with.
"""
from __future__ import annotations

import re
import string
from typing import Protocol, Sequence

import grain
import numpy as np

from data_pipelines.contamination import ContaminationGuard, guard_records
from data_pipelines.lm_pipeline import TextTokenizer
from data_pipelines.packing import masked_example, pack_and_batch, pad_and_batch
from jaxwrite.common import InputError, read_jsonl
from jaxwrite.prompts import CRITIC_USER, critic_messages, critic_verdict, official_prompt


class ChatTokenizer(TextTokenizer, Protocol):
    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str: ...


def chat_example(tokenizer: ChatTokenizer, prompt_messages: list[dict], completion: str) -> dict[str, np.ndarray]:
    """Packing example for (prompt messages, assistant completion), loss on the completion only."""
    prompt_ids, completion_ids, trained_len = assistant_turn_ids(tokenizer, prompt_messages, completion)
    ids = prompt_ids + completion_ids
    trained = [0] * len(prompt_ids) + [1] * trained_len + [0] * (len(completion_ids) - trained_len)
    return masked_example(ids, trained)


def assistant_turn_ids(tokenizer: ChatTokenizer, prompt_messages: list[dict],
                       completion: str) -> tuple[list[int], list[int], int]:
    """(prompt ids, assistant-turn ids, number of leading assistant ids to train on)."""
    prompt = tokenizer.apply_chat_template(prompt_messages, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        prompt_messages + [{"role": "assistant", "content": completion}], add_generation_prompt=False)
    if not full.startswith(prompt):
        raise ValueError("the chat template renders the conversation with a different prefix than the "
                         "prompt with a generation prompt; cannot locate the assistant turn")
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    completion_ids = tokenizer.encode(full[len(prompt):], add_special_tokens=False)
    eos = set(tokenizer.eos_ids)
    end = next((i for i, t in enumerate(completion_ids) if t in eos), None)
    if end is None:
        completion_ids = completion_ids + [tokenizer.eos_ids[0]]
        end = len(completion_ids) - 1
    return prompt_ids, completion_ids, end + 1


CRITIC_FIELDS = ("query", "response", "criterion", "score", "reason")
_FORMATS = ("{query, response, criterion, score, reason} verdicts (e.g. `jaxwrite data critic-data`'s train.jsonl) "
            "or {messages: [system, user, assistant]} (`jaxwrite data critic-sft` output, critic-data's "
            "*.messages.jsonl)")


def read_critic_records(path: str) -> list[tuple[int, dict]]:
    """(line, record) for each critic SFT record, validated field by field."""
    out = []
    for lineno, rec in read_jsonl(path, required=CRITIC_FIELDS):
        for key in ("query", "response", "reason"):
            if not isinstance(rec[key], str):
                raise InputError("expected a string", path=path, line=lineno, field=key)
        if not isinstance(rec["criterion"], dict) or not isinstance(rec["criterion"].get("name"), str):
            raise InputError("expected a criterion object with a string 'name'", path=path, line=lineno,
                             field="criterion")
        score = rec["score"]
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 10:
            raise InputError(f"expected an integer 1..10, got {score!r}", path=path, line=lineno, field="score")
        out.append((lineno, rec))
    return out


def read_writer_records(path: str) -> list[tuple[int, dict]]:
    """(line, record) for each writer SFT record `{query, response}`."""
    out = []
    for lineno, rec in read_jsonl(path, required=("query", "response")):
        for key in ("query", "response"):
            if not isinstance(rec[key], str):
                raise InputError("expected a string", path=path, line=lineno, field=key)
        out.append((lineno, rec))
    return out


def critic_file_format(path: str) -> str:
    """"verdicts" or "messages", from the file's first record; InputError naming both formats otherwise."""
    for lineno, rec in read_jsonl(path):
        if "messages" in rec:
            return "messages"
        if any(key in rec for key in CRITIC_FIELDS):
            return "verdicts"
        raise InputError(f"expected critic SFT records: {_FORMATS}; found fields {', '.join(sorted(rec)) or 'none'}",
                         path=path, line=lineno)
    return "verdicts"   # an empty file: no records either way


def template_field(template: str, field: str):
    """A function reading `field`'s value back out of a text rendered from the `str.format` template
    (None when the text does not follow the template); a field used twice must repeat its value."""
    parts, groups = [], {}
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is None:
            continue
        if name in groups:
            parts.append(f"(?P={groups[name]})")
        else:
            groups[name] = f"f{len(groups)}"
            parts.append(f"(?P<{groups[name]}>.*?)")
    if field not in groups:
        raise ValueError(f"the template has no {{{field}}} field")
    pattern = re.compile("".join(parts), re.DOTALL)

    def read(text: str) -> str | None:
        match = pattern.fullmatch(text)
        return match.group(groups[field]) if match else None
    return read


def _rendered_records(path: str) -> list[tuple[int, dict]]:
    """(line, {query, prompt, completion}) for each `{messages}` record; query is None where the user turn
    does not follow the official critic template (the guard then cannot check it)."""
    query_of = template_field(official_prompt(CRITIC_USER), "query")
    out = []
    for lineno, rec in read_jsonl(path):
        msgs = rec.get("messages")
        if "messages" not in rec:
            raise InputError("expected {messages} like the file's first record (one format per file)",
                             path=path, line=lineno, field="messages")
        if not (isinstance(msgs, list) and len(msgs) >= 2 and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in msgs)):
            raise InputError("expected a list of at least two {role, content} objects with string values",
                             path=path, line=lineno, field="messages")
        users = [m["content"] for m in msgs[:-1] if m["role"] == "user"]
        if msgs[-1]["role"] != "assistant" or not users:
            raise InputError("expected a user turn and, last, the assistant's verdict", path=path, line=lineno,
                             field="messages")
        prompt = [{"role": m["role"], "content": m["content"]} for m in msgs[:-1]]
        out.append((lineno, {"query": query_of(users[-1]), "prompt": prompt, "completion": msgs[-1]["content"]}))
    return out


def critic_sft_conversations(path: str, guard: ContaminationGuard | None, on_overlap: str = "error",
                             allow_overlap: bool = False) -> tuple[list[tuple[list[dict], str]], dict]:
    """[(prompt messages, assistant verdict)] from a critic SFT jsonl file in either format (see the
    module doc), after the contamination guard."""
    fmt = critic_file_format(path)
    if fmt == "messages":
        rendered = _rendered_records(path)
        unread = next((line for line, r in rendered if r["query"] is None), None)
        if guard is not None and unread is not None:
            raise InputError("the user turn does not follow the critic template (WritingBench's official one), so "
                             "the contamination guard cannot find its query; give "
                             "the verdict records instead, or turn the guard off (--config.data.benchmark_path=)",
                             path=path, line=unread, field="messages")
    else:
        rendered = [(line, {"query": r["query"], "completion": critic_verdict(r["score"], r["reason"]),
                            "prompt": critic_messages(r["query"], r["criterion"], r["response"])})
                    for line, r in read_critic_records(path)]
    records, stats = guard_records(rendered, guard, path=path, on_overlap=on_overlap, allow_overlap=allow_overlap)
    conversations = [(r["prompt"], r["completion"]) for _, r in records]
    return conversations, {**stats, "format": fmt, "records": len(records) + stats["dropped"],
                           "kept": len(records)}


def critic_sft_examples(path: str, tokenizer: ChatTokenizer, guard: ContaminationGuard | None,
                        on_overlap: str = "error", allow_overlap: bool = False
                        ) -> tuple[list[dict[str, np.ndarray]], dict]:
    """Tokenised critic SFT examples (loss on the verdict JSON + end of turn); (examples, stats)."""
    conversations, stats = critic_sft_conversations(path, guard, on_overlap, allow_overlap)
    return [chat_example(tokenizer, m, c) for m, c in conversations], stats


def writer_sft_examples(path: str, tokenizer: ChatTokenizer, guard: ContaminationGuard | None,
                        on_overlap: str = "error", allow_overlap: bool = False,
                        system_prompt: str | None = None) -> tuple[list[dict[str, np.ndarray]], dict]:
    """Tokenised writer SFT examples: one user turn with the query, loss on the response."""
    records, stats = guard_records(read_writer_records(path), guard, path=path, on_overlap=on_overlap,
                                   allow_overlap=allow_overlap)
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    examples = [chat_example(tokenizer, system + [{"role": "user", "content": r["query"]}], r["response"])
                for _, r in records]
    return examples, {**stats, "records": len(records) + stats["dropped"], "kept": len(records)}


def sft_dataset(examples: Sequence[dict[str, np.ndarray]], seq_len: int, batch_size: int, seed: int = 0,
                num_epochs: int | None = 1, pack: bool = True, pad_id: int = 0,
                on_long: str = "split", drop_remainder: bool = True) -> grain.IterDataset:
    """Shuffled (per epoch, seeded) batches of SFT rows, packed or one example per padded row."""
    ds = grain.MapDataset.source(list(examples)).shuffle(seed=seed).repeat(num_epochs).to_iter_dataset()
    if pack:
        return pack_and_batch(ds, seq_len, batch_size, seed=seed, on_long=on_long, drop_remainder=drop_remainder)
    return pad_and_batch(ds, seq_len, batch_size, pad_id=pad_id, on_long=on_long, drop_remainder=drop_remainder)
