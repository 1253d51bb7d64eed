"""Who judged, and how: the one `judging` block every evaluator's summary carries (`judge_block`), the
judge described from its label for score files written before judges described themselves, the
failures a run left unresolved with their reasons, and the Markdown of both the block and the answer
extraction (what of each response the judge saw), which `write_report` renders.

The block: who judged, in which mode (official or not) and with which settings, the prompt version,
what of each response the judge saw, and how many items failed and why.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Mapping

from jaxwrite.chat.usage import Prices, usage_total
from jaxwrite.common.job_meta import USAGE_RUNS
from jaxwrite.common.jsonl import read_done_ids, scan_jsonl
from jaxwrite.evals.report import markdown_table


def answer_extraction_markdown(extraction: dict[str, Any], shown: int = 20) -> str:
    """What was scored of each response (see `jaxwrite.evals.responses.ResponseAnswers.summary`): mode,
    rule, counts, and the malformed responses with their reasons (the first `shown` listed by id)."""
    mode = extraction["mode"]
    applied = mode if mode == extraction["applied"] else f"{mode} -> {extraction['applied']}"
    text = (f"Mode: {applied}. Rule: {extraction['rule']}.\n\n"
            + markdown_table(["answers extracted", "official cut applied", "raw", "malformed (not scored)"],
                             [[extraction["answers"], extraction["stripped"], extraction["raw"],
                               extraction["malformed"]]]))
    if extraction["malformed"]:
        text += ("\n\nMalformed think/answer responses are left out of every score, never scored as an "
                 "answer. Reasons:\n\n"
                 + markdown_table(["reason", "responses"], list(extraction["malformed_reasons"].items())))
        items = extraction["malformed_items"]
        text += "\n\n" + "\n".join(f"- {item['id']}: {'; '.join(item['problems'])}" for item in items[:shown])
        if len(items) > shown:
            text += f"\n- ... and {len(items) - shown} more (see summary.json)"
    return text


def judge_from_label(label: str) -> dict[str, Any]:
    """A judge description inferred from its label alone, marked `inferred`: for score files written
    before judges described themselves. Labels read "http:MODEL@URL", "local:NAME" or
    "local[score_logit ...]:NAME"; any other prefix is an unknown transport."""
    kind = label.split(":", 1)[0].split("[", 1)[0]
    mode = "score_logit" if "score_logit" in label else "generate"
    return {"label": label, "transport": kind if kind in ("http", "local") else "unknown", "mode": mode,
            "official": mode == "generate", "settings": {}, "inferred": True}


def unresolved_failures(failures_path: str | os.PathLike, done_path: str | os.PathLike, id_key: str,
                        ids: Any = None) -> dict[str, int]:
    """{reason: items} over the items a RecordJob's failures file names and its output still lacks
    (restricted to `ids` when given), each counted once by its latest failure line (its `error`, and
    `attempts` unless `permanent`). A failure that a later run resolved is not counted."""
    if not os.path.isfile(failures_path):
        return {}
    done = read_done_ids(done_path, id_key)
    latest: dict[Any, str] = {}
    for _, rec, bad in scan_jsonl(failures_path):
        rid = rec.get(id_key)
        if bad is None and rid not in done and (ids is None or rid in ids):
            # A permanent error was asked once, whatever budget the line records.
            latest[rid] = failure_reason(rec.get("error"), None if rec.get("permanent") else rec.get("attempts"))
    return dict(collections.Counter(latest.values()).most_common())


def failure_reason(error: Any, attempts: Any = None, width: int = 200) -> str:
    """One short line for a reason table: the error's first line, cut to `width`, and the tries."""
    text = str(error or "").strip()
    text = text.splitlines()[0] if text else "unknown error"
    text = text if len(text) <= width else text[:width - 3] + "..."
    return f"{text} (after {attempts} tries)" if attempts else text


def judge_block(judge: Mapping[str, Any] | None, prompt: str | None, answers: Any,
                failures: Mapping[str, int], no_judge: str = "no judge",
                usage: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """{"judging": {...}} for a summary (`write_report` renders it as the "Judging" section).

    judge: a description (`jaxwrite.chat.describe_model` of a live judge, or `judge_from_label`), None
    when nothing was judged, which
    `no_judge` explains; prompt: the prompt version; answers: what of each response the judge saw, as
    an answer-extraction summary (`ResponseAnswers.summary`), {model: summary}, or a sentence;
    failures: {reason: items} of items tried and not scored. Malformed think/answer responses in
    `answers` are added to the failures, since they are not scored either.
    usage: {role ("judge", "model", ...): `jaxwrite.chat.Usage.to_dict`} of the models the run asked
    (requests, tokens, time, cache hits and misses, cost), rendered as a table.
    """
    block: dict[str, Any] = {"judge": None, "transport": None, "mode": None, "official": None, "settings": {}}
    if judge is None:
        block["note"] = no_judge
    else:
        block |= {"judge": judge["label"], "transport": judge.get("transport"), "mode": judge.get("mode"),
                  "official": judge.get("official"), "settings": dict(judge.get("settings") or {})}
        if judge.get("inferred"):
            block["inferred"] = True
    reasons = {k: int(v) for k, v in failures.items() if v}
    for name, summary in _extraction_summaries(answers).items():
        if summary.get("malformed"):
            who = f" ({name})" if name else ""
            reasons[f"malformed think/answer response{who}, not scored (see answer extraction)"] = \
                summary["malformed"]
    block |= {"prompt": prompt, "answer_extraction": _compact_extraction(answers),
              "failed": sum(reasons.values()), "failure_reasons": reasons}
    if usage:
        block["usage"] = {role: dict(u) for role, u in usage.items()}
    return {"judging": block}


def _extraction_summaries(answers: Any) -> dict[str, Mapping[str, Any]]:
    """{model name ("" for one file): answer-extraction summary}; a sentence has none."""
    if not isinstance(answers, Mapping):
        return {}
    return {"": answers} if "applied" in answers else dict(answers)


def _compact_extraction(answers: Any) -> Any:
    if not isinstance(answers, Mapping):
        return answers
    compact = {name: {k: s.get(k) for k in ("mode", "applied", "rule", "malformed")}
               for name, s in _extraction_summaries(answers).items()}
    return compact[""] if "" in compact else compact


def recorded_usage(meta: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """{role: usage summed over every run that wrote an output} from its metadata's `usage_runs`
    (`jaxwrite.common.job_meta.record_usage`), priced as the latest run was; {} when none was recorded."""
    runs = [r for r in (meta or {}).get(USAGE_RUNS) or [] if isinstance(r, Mapping)]
    out = {}
    for role in dict.fromkeys(role for run in runs for role in run):
        entries = [run[role] for run in runs if isinstance(run.get(role), Mapping)]
        last = entries[-1]
        cost = last.get("cost") or None
        prices = Prices(cost["price_in_per_million"], cost["price_out_per_million"]) if cost else None
        scope = "1 run" if len(entries) == 1 else f"{len(entries)} runs"
        out[role] = usage_total(entries).to_dict(prices, last.get("cache")) | {"scope": f"{scope} of this output"}
    return out


def judging_markdown(judging: Mapping[str, Any]) -> str:
    """The "Judging" section: a `- ` list of the block's fields."""
    lines = []
    if judging["judge"] is None:
        lines.append(f"- Judge: none ({judging.get('note', 'no judge')})")
    else:
        official = "official" if judging["official"] else "NON-OFFICIAL"
        lines += [f"- Judge: {judging['judge']} (transport: {judging['transport']})",
                  f"- Mode: {judging['mode']} ({official} judging mode)"]
        if judging["settings"]:
            lines.append("- Settings: " + ", ".join(f"{k}={v}" for k, v in judging["settings"].items()))
        if judging.get("inferred"):
            lines.append("- Transport and mode inferred from the judge label (recorded before judges "
                         "described themselves)")
    if judging.get("prompt"):
        lines.append(f"- Prompt: {judging['prompt']}")
    answers = judging.get("answer_extraction")
    if isinstance(answers, Mapping):
        per_model = {"": answers} if "applied" in answers else answers
        for name, s in per_model.items():
            mode = s["mode"] if s["mode"] == s["applied"] else f"{s['mode']} -> {s['applied']}"
            lines.append(f"- Think/answer handling{f' ({name})' if name else ''}: {mode}: {s['rule']}")
    elif answers:
        lines.append(f"- Think/answer handling: {answers}")
    reasons = judging.get("failure_reasons") or {}
    lines.append(f"- Failed items (not scored): {judging.get('failed', 0)}"
                 + (" [" + "; ".join(f"{r}: {n}" for r, n in reasons.items()) + "]" if reasons else ""))
    text = "\n".join(lines)
    if judging.get("usage"):
        text += "\n\n" + usage_markdown(judging["usage"])
    return text


def usage_markdown(usage: Mapping[str, Mapping[str, Any]]) -> str:
    """Calls, tokens, time and cost per role: a table, then where the cache lives and what a cost
    figure leaves out."""
    rows, notes = [], []
    for role, u in usage.items():
        cost = u.get("cost")
        rows.append([f"{role} ({u['scope']})" if u.get("scope") else role, u["requests"], u["cache_hits"],
                     u["cache_misses"], u["prompt_tokens"], u["completion_tokens"], u["wall_s"],
                     u["requests_per_s"], u["tokens_per_s"], cost["usd"] if cost else None,
                     cost["saved_by_cache_usd"] if cost else None])
        notes.append(f"{role}: cache {u['cache']}")
        if u.get("unreported_requests"):
            notes.append(f"{role}: {u['unreported_requests']} answered requests came without token counts "
                         "(not in the token figures" + (" nor the cost" if cost else "") + ")")
        if u.get("errors"):
            notes.append(f"{role}: {u['errors']} requests came back with an error (never cached)")
    table = markdown_table(["model", "requests", "cache hits", "cache misses", "prompt tokens", "completion tokens",
                            "wall s", "requests/s", "tokens/s", "est. cost (USD)", "saved by cache (USD)"],
                           rows, digits=2)
    return ("Calls, tokens and cost (requests = calls made to the model; hits were answered from the cache "
            "and cost nothing):\n\n" + table + "\n\n" + "\n".join(f"- {n}" for n in notes))
