"""Chat-formatted SFT data with the loss on the assistant turn only: critic SFT and writer SFT.

Masking: the prompt is rendered with the tokenizer's chat template and a generation prompt; the full
conversation (prompt + assistant turn) is rendered without one, and the assistant part is the text the
full rendering adds after the prompt. The two parts are tokenised separately so the boundary is exact.
The loss covers the assistant part up to and including its first end-of-turn token (one of
`tokenizer.eos_ids`); what a template prints after it (e.g. Qwen's trailing newline) is not trained.
A template that emits no end-of-turn token gets `eos_ids[0]` appended and trained.

Critic SFT records are `{query, response, criterion, score, reason}`: the messages are WritingBench's
critic [system, user] pair, user = the official `str.format` template with `criteria` = the criterion
dict (so it renders as Python `str(dict)`), and the assistant turn is `{"score": s, "reason": "..."}`.
The response is used as given in the record (no `</think>` stripping: the records are the critic's
inputs as they should be seen). The prompt strings are parameters (the official ones live in the data
dir, `writingbench/prompts/`; see `load_critic_prompts`).
"""
from __future__ import annotations

import json
import os
from typing import Protocol, Sequence

import grain
import numpy as np

from data_pipelines.contamination import ContaminationGuard, guard_records
from data_pipelines.lm_pipeline import TextTokenizer
from data_pipelines.packing import masked_example, pack_and_batch, pad_and_batch
from jaxwrite.common import InputError, read_jsonl


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


def load_critic_prompts(writingbench_dir: str) -> tuple[str, str]:
    """(system prompt, user str.format template) from `<writingbench>/prompts/`."""
    out = []
    for name in ("critic_system.txt", "critic_user.format.txt"):
        path = os.path.join(writingbench_dir, "prompts", name)
        if not os.path.exists(path):
            raise InputError("critic prompt file not found", path=path)
        with open(path, encoding="utf-8") as f:
            out.append(f.read())
    return out[0], out[1]


def critic_messages(query: str, response: str, criterion: dict, system_prompt: str,
                    user_template: str) -> list[dict]:
    """WritingBench critic call for one (query, criterion): [system, user]."""
    user = user_template.format(criteria=criterion, query=query, response=response)
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def critic_verdict(score: int, reason: str) -> str:
    """The critic's assistant turn, the JSON the WritingBench parser accepts."""
    return json.dumps({"score": score, "reason": reason}, ensure_ascii=False)


def read_critic_records(path: str) -> list[tuple[int, dict]]:
    """(line, record) for each critic SFT record, validated field by field."""
    out = []
    for lineno, rec in read_jsonl(path, required=("query", "response", "criterion", "score", "reason")):
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


def critic_sft_conversations(path: str, system_prompt: str, user_template: str,
                             guard: ContaminationGuard | None, on_overlap: str = "error",
                             allow_overlap: bool = False) -> tuple[list[tuple[list[dict], str]], dict]:
    """[(prompt messages, assistant verdict)] from a critic SFT jsonl file, after the contamination guard."""
    records, stats = guard_records(read_critic_records(path), guard, path=path, on_overlap=on_overlap,
                                   allow_overlap=allow_overlap)
    conversations = [(critic_messages(r["query"], r["response"], r["criterion"], system_prompt, user_template),
                      critic_verdict(r["score"], r["reason"])) for _, r in records]
    return conversations, {**stats, "records": len(records) + stats["dropped"], "kept": len(records)}


def critic_sft_examples(path: str, tokenizer: ChatTokenizer, system_prompt: str, user_template: str,
                        guard: ContaminationGuard | None, on_overlap: str = "error",
                        allow_overlap: bool = False) -> tuple[list[dict[str, np.ndarray]], dict]:
    """Tokenised critic SFT examples (loss on the verdict JSON + end of turn); (examples, stats)."""
    conversations, stats = critic_sft_conversations(path, system_prompt, user_template, guard, on_overlap,
                                                    allow_overlap)
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
