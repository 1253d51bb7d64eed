"""Think/answer-formatted documents for continual pretraining: the small "own long-CoT samples" slice
of the LongWriter-Zero mix, built from corpus passages.

Each document is a length-control writing task in the exact base-model prompt format, a short plan,
and a real corpus passage of the stated length as the answer:
  <instruction> User: Write … in about N words. Assistant: <think>plan</think>\n<answer>passage</answer>
A policy that has seen the protocol produces it from the first rollout, so GRPO's rewards vary
within a group instead of all being zero (the cold start the paper avoids with a 32B base model).
"""
from __future__ import annotations

import json
import os

import numpy as np

from data_pipelines import clean_files, corpus_files
from jaxwrite.text import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, count_words, think_answer_base_prompt

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


def write_protocol_docs(data_dir: str, out_path: str, count: int, min_words: int = 20, max_words: int = 80,
                        seed: int = 0, zh_fraction: float = 0.0) -> dict:
    """Writes `count` documents as jsonl {"text": ...}; returns counts. Deterministic for a seed."""
    pools = {}
    for lang, folder in (("en", "corpus_en"), ("zh", "corpus_zh")):
        if lang == "zh" and zh_fraction <= 0:
            continue
        docs, _ = clean_files(corpus_files(os.path.join(data_dir, folder)), max_chars=10 ** 9)
        pools[lang] = [p for _, text in docs for p in _passages(text, min_words, max_words)]
        if not pools[lang]:
            raise ValueError(f"no {lang} passages of {min_words}-{max_words} words under {data_dir}/{folder}")
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for _ in range(count):
            lang = "zh" if "zh" in pools and rng.random() < zh_fraction else "en"
            passage = pools[lang][int(rng.integers(len(pools[lang])))]
            n = max(5, int(round(count_words(passage) / 5) * 5))
            task = _TASKS[lang][int(rng.integers(len(_TASKS[lang])))]
            topic = _TOPICS[lang][int(rng.integers(len(_TOPICS[lang])))]
            text = (think_answer_base_prompt(task.format(n=n, topic=topic), lang) + _PLANS[lang].format(n=n)
                    + f"{THINK_CLOSE}\n{ANSWER_OPEN}{passage}{ANSWER_CLOSE}")
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, out_path)
    return {"documents": count, **{f"{lang}_passages": len(p) for lang, p in pools.items()}}
