"""Teacher verdicts -> critic SFT data (the records `critic_sft` trains on), split by query.

A verdict is any judge's `{query, response, criterion, score, reason}`: `criterion` is WritingBench's
dict (`{name, criteria_description, "1-2", ...}`, rendered into the official prompt with `str(dict)`)
or a bare string, which becomes `{"name": s}` because the official prompt is always filled with a dict.
`jaxwrite prep critic-score` writes per-response lines `{response_id, id, scores: {name: [{score,
reason}]}}` instead; `verdicts_from_critic_scores` joins them with the criteria and responses files it
scored, so a real judge's output feeds the same builder (one verdict per repeat).

Output (`build_critic_data`): train.jsonl / heldout.jsonl in the critic-SFT record format
(`read_critic_records`), the same splits rendered in the official format (`*.messages.jsonl`: the
WritingBench critic [system, user] with the criterion filled, assistant = the verdict JSON exactly as
the critic must print it) and stats.json. The split is by query (no query on both sides), seeded.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Sequence

from data_pipelines.contamination import ContaminationGuard, guard_records
from jaxwrite.common import InputError, read_jsonl, write_jsonl
from jaxwrite.prompts import critic_messages, critic_verdict
from jaxwrite.text import extract_answer, resolve_answer_extraction

VERDICT_FIELDS = ("query", "response", "criterion", "score", "reason")


def _score(value, path: str, line: int, field: str) -> int:
    # The official parse rule accepts an int or an integral float, never a bool or a string.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise InputError(f"expected an integer score 1..10, got {value!r}", path=path, line=line, field=field)
    return value


def _criterion(value, path: str, line: int) -> dict:
    if isinstance(value, str) and value.strip():
        return {"name": value}
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"].strip():
        return value   # key order kept: the prompt renders str(dict) in this order
    raise InputError("expected a criterion object with a non-empty string 'name', or a non-empty string",
                     path=path, line=line, field="criterion")


def check_verdict(rec: dict, path: str, line: int) -> dict:
    """One validated verdict in the critic-SFT record format (missing/bad field -> InputError)."""
    for key in VERDICT_FIELDS:
        if key not in rec:
            raise InputError("missing required field", path=path, line=line, field=key)
    for key in ("query", "response", "reason"):
        if not isinstance(rec[key], str):
            raise InputError(f"expected a string, got {type(rec[key]).__name__}", path=path, line=line, field=key)
    return {"query": rec["query"], "response": rec["response"], "criterion": _criterion(rec["criterion"], path, line),
            "score": _score(rec["score"], path, line, "score"), "reason": rec["reason"]}


def read_verdicts(path: str) -> list[tuple[int, dict]]:
    """(line, verdict) for each line of a flat verdict file."""
    return [(line, check_verdict(rec, path, line)) for line, rec in read_jsonl(path)]


def verdicts_from_critic_scores(scores_path: str, criteria_path: str, responses_path: str,
                                answer_extraction: str = "auto") -> list[tuple[int, dict]]:
    """Verdicts from `jaxwrite prep critic-score` output, joined with the files it scored.

    Each verdict's response is what the critic judged: the responses file under critic-score's
    `answer_extraction` (the same mode; "auto", its default, is decided over the whole file, as
    critic-score decides it). Lines are those of the scores file.
    """
    criteria = {str(r["id"]): r for _, r in read_jsonl(criteria_path, required=("id", "query", "checklist"))}
    raw = {r["response_id"]: r["response"] for _, r in read_jsonl(responses_path, required=("response_id", "response"))}
    applied = resolve_answer_extraction(answer_extraction, raw.values())
    responses = {rid: extract_answer(text, applied).text for rid, text in raw.items()}
    out = []
    for line, rec in read_jsonl(scores_path, required=("response_id", "id", "scores")):
        if str(rec["id"]) not in criteria:
            raise InputError(f"expected an id of {criteria_path}", path=scores_path, line=line, field="id")
        if rec["response_id"] not in responses:
            raise InputError(f"expected a response_id of {responses_path}", path=scores_path, line=line,
                             field="response_id")
        query = criteria[str(rec["id"])]
        by_name = {c["name"]: c for c in query["checklist"]}
        response = responses[rec["response_id"]]
        if response is None:
            raise InputError("scores a malformed think/answer response, which critic-score never scores: expected "
                             "the --answer-extraction critic-score ran with", path=scores_path, line=line,
                             field="response_id")
        if not isinstance(rec["scores"], dict):
            raise InputError("expected {criterion name: [{score, reason}]}", path=scores_path, line=line,
                             field="scores")
        for name, repeats in rec["scores"].items():
            if name not in by_name:
                raise InputError(f"expected a criterion name of query {rec['id']!r}, got {name!r}",
                                 path=scores_path, line=line, field="scores")
            for k, v in enumerate(repeats if isinstance(repeats, list) else [repeats]):
                field = f"scores.{name}[{k}]"
                if not isinstance(v, dict) or "score" not in v or not isinstance(v.get("reason"), str):
                    raise InputError("expected {score, reason}", path=scores_path, line=line, field=field)
                out.append((line, {"query": query["query"], "response": response, "criterion": by_name[name],
                                   "score": _score(v["score"], scores_path, line, field + ".score"),
                                   "reason": v["reason"]}))
    return out


def split_by_query(records: Sequence[tuple[int, dict]], heldout_fraction: float,
                   seed: int = 0) -> tuple[list[tuple[int, dict]], list[tuple[int, dict]]]:
    """(held-in, held-out): a query goes wholly to one side, chosen by a seeded hash of its text
    (stable across machines and Python runs, independent of file order)."""
    if not 0.0 <= heldout_fraction < 1.0:
        raise InputError(f"expected a held-out fraction in [0, 1), got {heldout_fraction}", field="heldout_fraction")

    def held_out(query: str) -> bool:
        digest = hashlib.sha256(f"{seed}\0{query}".encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") / 2 ** 64 < heldout_fraction

    train = [(n, r) for n, r in records if not held_out(r["query"])]
    heldout = [(n, r) for n, r in records if held_out(r["query"])]
    return train, heldout


def build_critic_data(records: Sequence[tuple[int, dict]], out_dir: str, *, source: str,
                      heldout_fraction: float = 0.1, seed: int = 0,
                      guard: ContaminationGuard | None = None, on_overlap: str = "error",
                      allow_overlap: bool = False, teacher: str = "") -> dict:
    """Writes train/heldout critic-SFT records + their official-format renderings + stats.json."""
    os.makedirs(out_dir, exist_ok=True)
    # The guard runs on the training side only: held-out verdicts are evaluation data.
    train, heldout = split_by_query(records, heldout_fraction, seed)
    train, guard_stats = guard_records(train, guard, path=source, on_overlap=on_overlap, allow_overlap=allow_overlap)
    stats = {"source": source, "teacher": teacher, "seed": seed, "heldout_fraction": heldout_fraction,
             "verdicts": len(records), "guard": guard_stats}
    for name, split in (("train", train), ("heldout", heldout)):
        recs = [r for _, r in split]
        write_jsonl(os.path.join(out_dir, f"{name}.jsonl"), recs)
        write_jsonl(os.path.join(out_dir, f"{name}.messages.jsonl"), (
            {"messages": critic_messages(r["query"], r["criterion"], r["response"])
             + [{"role": "assistant", "content": critic_verdict(r["score"], r["reason"])}]} for r in recs))
        stats[name] = {"records": len(recs), "queries": len({r["query"] for r in recs}),
                       "scores": {s: sum(r["score"] == s for r in recs) for s in range(1, 11)}}
    with open(os.path.join(out_dir, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, ensure_ascii=False, indent=2)
    return stats
