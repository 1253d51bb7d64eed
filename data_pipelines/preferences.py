"""Preference pairs from the WritingPreferenceBench zh annotation pool, for a Bradley–Terry reward model.

Pairs: within each `question_id`, every two responses whose mean human score (0–3, averaged over
annotators) differs by at least `min_delta` (1.0) form (prompt, chosen = higher, rejected = lower).
The pool gives 20,287 such pairs. Train/eval are split BY PROMPT: question ids are sorted, shuffled
with the seed, and the first `eval_fraction` of them go to eval, so no prompt is in both splits.
Length baseline: predict that the longer response (more characters) is chosen; equal lengths count
half. Tokenised rows: (prompt + chosen, prompt + rejected) through the chat template (one user turn,
the response as the assistant turn); an over-long row is handled by `truncation`:
"response" (cut the response's tail, keep the prompt and the end-of-turn token), "drop" (skip the
pair) or "error"; every truncated or dropped pair is counted.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import os

import numpy as np

from data_pipelines.chat_sft import ChatTokenizer, assistant_turn_ids
from jaxwrite.common import InputError, read_jsonl

POOL_PATH = os.path.join("preferences", "writingpreferencebench_zh_pool", "responses_with_human_scores.jsonl.gz")


@dataclasses.dataclass(frozen=True)
class PreferencePair:
    question_id: str
    prompt: str
    chosen: str
    rejected: str
    chosen_score: float
    rejected_score: float
    chosen_model: str
    rejected_model: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def load_scored_responses(path: str) -> dict[str, list[dict]]:
    """question_id -> responses, each with `mean_score` added; validated line by line."""
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for lineno, rec in read_jsonl(path, required=("question_id", "prompt", "response", "model", "human_scores")):
        scores = rec["human_scores"]
        if not isinstance(scores, list) or not scores:
            raise InputError("expected a non-empty list", path=path, line=lineno, field="human_scores")
        values = []
        for s in scores:
            v = s.get("score") if isinstance(s, dict) else None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"expected objects with a numeric 'score', got {s!r}", path=path, line=lineno,
                                 field="human_scores")
            values.append(float(v))
        groups[str(rec["question_id"])].append({**rec, "mean_score": sum(values) / len(values)})
    return dict(groups)


def make_pairs(groups: dict[str, list[dict]], min_delta: float = 1.0) -> list[PreferencePair]:
    """All within-prompt pairs whose mean scores differ by at least `min_delta`, in file order."""
    pairs = []
    for qid, responses in groups.items():
        for a, b in itertools.combinations(responses, 2):
            if abs(a["mean_score"] - b["mean_score"]) < min_delta:
                continue
            hi, lo = (a, b) if a["mean_score"] > b["mean_score"] else (b, a)
            pairs.append(PreferencePair(qid, hi["prompt"], hi["response"], lo["response"],
                                        hi["mean_score"], lo["mean_score"], hi["model"], lo["model"]))
    return pairs


def cap_per_prompt(pairs: list[PreferencePair], max_per_prompt: int,
                   seed: int = 0) -> tuple[list[PreferencePair], int]:
    """(kept, number capped): at most `max_per_prompt` pairs of each prompt (0 = all), a seeded sample kept
    in file order. Pairs grow with the square of a prompt's responses, so an uncapped pool repeats every
    response in many pairs (the WritingPreferenceBench pool: ~100 pairs a prompt, over 200 MB)."""
    if max_per_prompt < 0:
        raise InputError(f"expected a cap of 0 (none) or more pairs per prompt, got {max_per_prompt}")
    if not max_per_prompt:
        return list(pairs), 0
    by_prompt: dict[str, list[int]] = collections.defaultdict(list)
    for i, p in enumerate(pairs):
        by_prompt[p.question_id].append(i)
    rng = np.random.default_rng(seed)
    keep = set()
    for qid in sorted(by_prompt):
        positions = by_prompt[qid]
        if len(positions) > max_per_prompt:
            positions = rng.choice(positions, max_per_prompt, replace=False).tolist()
        keep.update(positions)
    return [p for i, p in enumerate(pairs) if i in keep], len(pairs) - len(keep)


def split_by_prompt(pairs: list[PreferencePair], eval_fraction: float = 0.1,
                    seed: int = 0) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(train, eval): whole prompts go to one side; the eval prompts are a seeded sample."""
    if not 0.0 < eval_fraction < 1.0:
        raise InputError(f"eval_fraction must be in (0, 1), got {eval_fraction}")
    qids = sorted({p.question_id for p in pairs})
    order = np.random.default_rng(seed).permutation(len(qids))
    n_eval = max(1, round(eval_fraction * len(qids)))
    eval_ids = {qids[i] for i in order[:n_eval]}
    return ([p for p in pairs if p.question_id not in eval_ids], [p for p in pairs if p.question_id in eval_ids])


def read_pairs(path: str) -> list[PreferencePair]:
    """Pairs from a jsonl of {prompt, chosen, rejected[, question_id, scores, models]} (`jaxwrite data pairs`
    or `jaxwrite data degraded-pairs` output); extra fields (e.g. `degradation`) are ignored."""
    pairs = []
    for lineno, rec in read_jsonl(path, required=("prompt", "chosen", "rejected")):
        for key in ("prompt", "chosen", "rejected"):
            if not isinstance(rec[key], str):
                raise InputError("expected a string", path=path, line=lineno, field=key)
        pairs.append(PreferencePair(str(rec.get("question_id", f"line{lineno}")), rec["prompt"], rec["chosen"],
                                    rec["rejected"], float(rec.get("chosen_score", 1.0)),
                                    float(rec.get("rejected_score", 0.0)), str(rec.get("chosen_model", "")),
                                    str(rec.get("rejected_model", ""))))
    return pairs


def length_baseline_accuracy(pairs: list[PreferencePair]) -> float:
    """Accuracy of predicting the longer response (in characters) as chosen; ties count 0.5."""
    if not pairs:
        return float("nan")
    hits = [1.0 if len(p.chosen) > len(p.rejected) else 0.5 if len(p.chosen) == len(p.rejected) else 0.0
            for p in pairs]
    return float(np.mean(hits))


@dataclasses.dataclass
class TruncationCounts:
    truncated: int = 0
    dropped: int = 0


def tokenize_pair(tokenizer: ChatTokenizer, pair: PreferencePair, max_len: int, truncation: str,
                  counts: TruncationCounts) -> dict[str, np.ndarray] | None:
    """{chosen_tokens, chosen_length, rejected_tokens, rejected_length}: [max_len] int32, padded with pad_id.

    Returns None for a pair dropped under truncation="drop" (counted in `counts`).
    """
    if truncation not in ("response", "drop", "error"):
        raise InputError(f"truncation must be 'response', 'drop' or 'error', got {truncation!r}")
    messages = [{"role": "user", "content": pair.prompt}]
    rows, cut = {}, False
    for side, text in (("chosen", pair.chosen), ("rejected", pair.rejected)):
        prompt_ids, turn_ids, trained = assistant_turn_ids(tokenizer, messages, text)
        turn_ids = turn_ids[:trained]  # the reward is read at the end-of-turn token
        ids = prompt_ids + turn_ids
        if len(ids) > max_len:
            if truncation == "error":
                raise InputError(f"pair of question {pair.question_id}: {side} row has {len(ids)} tokens, "
                                 f"over max_len {max_len}")
            if truncation == "drop" or len(prompt_ids) + 1 > max_len:
                counts.dropped += 1
                return None
            ids = prompt_ids + turn_ids[:max_len - len(prompt_ids) - 1] + [turn_ids[-1]]
            cut = True
        row = np.full(max_len, tokenizer.pad_id, np.int32)  # [max_len]
        row[:len(ids)] = ids
        rows[f"{side}_tokens"], rows[f"{side}_length"] = row, np.int32(len(ids))
    counts.truncated += cut
    return rows
