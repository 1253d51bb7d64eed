"""Think/answer-formatted documents for continual pretraining: the small "own long-CoT samples" slice
of the LongWriter-Zero mix, built from corpus passages; and the same protocol as chat SFT records for
warming up a pretrained instruct model (write_protocol_chat_records).

Each document is a length-control writing task in the exact base-model prompt format, a short plan,
and a real corpus passage of the stated length as the answer:
  <instruction> User: Write … in about N words. Assistant: <think>plan</think>\n<answer>passage</answer>
A policy that has seen the protocol produces it from the first rollout, so GRPO's rewards vary
within a group instead of all being zero (the cold start the paper avoids with a 32B base model).
"""
from __future__ import annotations

import os

import numpy as np

from data_pipelines import clean_files, corpus_files
from jaxwrite.common.jsonl import write_jsonl
from jaxwrite.text import (ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN, count_words, think_answer_base_prompt,
                           think_answer_user_turn)

# Short plans: the plan shares the generation cap with the answer, and at tiny scale (96-token cap) a
# long plan leaves the answer no room to close before the cap, so nothing is well-formed.
_PLANS = {
    "en": "About {n} words: one passage with an opening, a middle and an ending.",
    "zh": "约{n}字：一段文字，有开头、展开和结尾。",
}
# Varied requests (with and without a topic): a small policy ties the protocol to the exact wording it
# saw, so a single fixed request teaches it nothing about the RL prompts (measured on the tiny recipe:
# the template was followed after "Write a short passage in about N words." but not after "Write a short
# piece about the sea in about N words.").
_TASKS = {
    "en": ("Write a short passage in about {n} words.", "Write a short piece about {topic} in about {n} words.",
           "In about {n} words, write about {topic}.", "Please write roughly {n} words on {topic}.",
           "Write about {topic}. Length: about {n} words."),
    "zh": ("请写一段文字，{n}字左右。", "请写一篇关于{topic}的短文，{n}字左右。", "以{topic}为题，写{n}字左右的短文。"),
}
_TOPICS = {
    "en": ("a harbour town", "an autumn evening", "a family dinner", "a walk in the hills", "a storm at sea",
           "an old friend", "a letter from home", "a busy street", "a childhood memory", "a long winter",
           "a small shop", "a train station", "the morning news", "a summer garden", "a quarrel"),
    "zh": ("故乡", "秋夜", "一次远足", "老朋友", "雨天", "集市", "童年", "一封家书"),
}


def _passages(text: str, min_words: int, max_words: int) -> list[str]:
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    return [" ".join(p.split()) for p in paras if min_words <= count_words(p) <= max_words]


# Chat warm-up requests name no length: the warm-up teaches the protocol only, so how well the policy
# meets a requested length is left for GRPO to teach (and for its curves to show).
_CHAT_TASKS = {
    "en": ("Write a short passage about {topic}.", "Write a few sentences on {topic}.",
           "Please write about {topic}.", "Write a short piece about {topic}."),
    "zh": ("请写一段关于{topic}的文字。", "以{topic}为题写一篇短文。"),
}
_CHAT_PLANS = {"en": "One passage with an opening, a middle and an ending.", "zh": "一段文字，有开头、展开和结尾。"}


def _passage_pools(data_dir: str, min_words: int, max_words: int, zh_fraction: float) -> dict[str, list[str]]:
    pools = {}
    for lang, folder in (("en", "corpus_en"), ("zh", "corpus_zh")):
        if lang == "zh" and zh_fraction <= 0:
            continue
        docs, _ = clean_files(corpus_files(os.path.join(data_dir, folder)), max_chars=10 ** 9)
        pools[lang] = [p for _, text in docs for p in _passages(text, min_words, max_words)]
        if not pools[lang]:
            raise ValueError(f"no {lang} passages of {min_words}-{max_words} words under {data_dir}/{folder}")
    return pools


def _draws(pools: dict[str, list[str]], tasks: dict[str, tuple[str, ...]], count: int, seed: int,
           zh_fraction: float):
    """(lang, passage, task, topic) for each of `count` items, drawn in one fixed order from one seeded rng."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        lang = "zh" if "zh" in pools and rng.random() < zh_fraction else "en"
        passage = pools[lang][int(rng.integers(len(pools[lang])))]
        task = tasks[lang][int(rng.integers(len(tasks[lang])))]
        yield lang, passage, task, _TOPICS[lang][int(rng.integers(len(_TOPICS[lang])))]


def write_protocol_chat_records(data_dir: str, out_path: str, count: int, min_words: int = 20,
                                max_words: int = 80, seed: int = 0, zh_fraction: float = 0.0) -> dict:
    """Writes `count` writer-SFT records {query, response} that teach a chat model the protocol.

    query: the protocol's user turn (think_answer_user_turn), exactly what a "chat"-template rollout
    renders; response: a short plan and a corpus passage, <think>plan</think>\n<answer>passage</answer>.
    Requests carry a topic but no length (see _CHAT_TASKS). Deterministic for a seed; returns counts.
    """
    pools = _passage_pools(data_dir, min_words, max_words, zh_fraction)
    write_jsonl(out_path, ({"query": think_answer_user_turn(task.format(topic=topic), lang),
                            "response": f"{THINK_OPEN}{_CHAT_PLANS[lang]}{THINK_CLOSE}\n{ANSWER_OPEN}{passage}"
                                        f"{ANSWER_CLOSE}"}
                           for lang, passage, task, topic in _draws(pools, _CHAT_TASKS, count, seed, zh_fraction)))
    return {"records": count, **{f"{lang}_passages": len(p) for lang, p in pools.items()}}


def write_protocol_docs(data_dir: str, out_path: str, count: int, min_words: int = 20, max_words: int = 80,
                        seed: int = 0, zh_fraction: float = 0.0) -> dict:
    """Writes `count` documents as jsonl {"text": ...}; returns counts. Deterministic for a seed."""
    pools = _passage_pools(data_dir, min_words, max_words, zh_fraction)

    def document(lang, passage, task, topic):
        n = max(5, int(round(count_words(passage) / 5) * 5))
        return {"text": think_answer_base_prompt(task.format(n=n, topic=topic), lang)
                + _PLANS[lang].format(n=n) + f"{THINK_CLOSE}\n{ANSWER_OPEN}{passage}{ANSWER_CLOSE}"}

    write_jsonl(out_path, (document(*draw) for draw in _draws(pools, _TASKS, count, seed, zh_fraction)))
    return {"documents": count, **{f"{lang}_passages": len(p) for lang, p in pools.items()}}
