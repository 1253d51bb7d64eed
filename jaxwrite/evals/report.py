"""One report writer for every evaluator: summary.json, report.md and a self-contained report.html.

Sections carry Markdown (headings, paragraphs, `- ` lists and pipe tables are rendered to HTML) and
PNG figures; the HTML embeds the figures as data URIs so the file can be mailed or uploaded alone,
while the Markdown links them by relative path.

Every evaluator's summary carries one `judging` block (`judge_block`): who judged, in which mode
(official or not) and with which settings, the prompt version, what of each response the judge saw,
and how many items failed and why. `write_report` renders it as the "Judging" section, so the
Markdown and the JSON say the same. JSON files are written strictly (`write_json`): a NaN or an
infinity, which most JSON readers reject, becomes null and is listed under "non_finite_as_null".
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import html
import json
import math
import os
import pathlib
import shutil
from typing import Any, Mapping, Sequence

from jaxwrite.common.jsonl import read_done_ids, scan_jsonl
from jaxwrite.evals.official_prompts import official_prompt_source


@dataclasses.dataclass(frozen=True)
class Section:
    title: str
    markdown: str = ""
    figures: tuple[str, ...] = ()


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 2) -> str:
    """A pipe table; floats are rounded to `digits`, None shows as '-'."""
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


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


# ----------------------------------------------------------------------------- who judged, and how

def judge_from_label(label: str) -> dict[str, Any]:
    """A judge description inferred from its label alone, marked `inferred`: for score files written
    before judges described themselves. Labels read "http:MODEL@URL", "local:NAME" or
    "local[score_logit ...]:NAME"; any other prefix is an unknown transport."""
    kind = label.split(":", 1)[0].split("[", 1)[0]
    mode = "score_logit" if "score_logit" in label else "generate"
    return {"label": label, "transport": kind if kind in ("http", "local") else "unknown", "mode": mode,
            "official": mode == "generate", "settings": {}, "inferred": True}


def official_prompt_version(*names: str) -> str:
    """The version of verbatim official templates: their names and the upstream repo@commit."""
    sources = sorted({f"{s['repo']}@{s['commit'][:12]}" for s in map(official_prompt_source, names)})
    return f"official {' + '.join(names)} ({', '.join(sources)}, verbatim)"


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
                failures: Mapping[str, int], no_judge: str = "no judge") -> dict[str, Any]:
    """{"judging": {...}} for a summary (`write_report` renders it as the "Judging" section).

    judge: a description (`jaxwrite.chat.describe_model` of a live judge, or `judge_from_label`), None
    when nothing was judged, which
    `no_judge` explains; prompt: the prompt version; answers: what of each response the judge saw, as
    an answer-extraction summary (`ResponseAnswers.summary`), {model: summary}, or a sentence;
    failures: {reason: items} of items tried and not scored. Malformed think/answer responses in
    `answers` are added to the failures, since they are not scored either.
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
    return "\n".join(lines)


# ----------------------------------------------------------------------------- files

def finite_json(value: Any, where: str = "", found: list[str] | None = None) -> tuple[Any, list[str]]:
    """`value` with every NaN or infinity replaced by None, and the dotted paths where that happened."""
    found = [] if found is None else found
    if isinstance(value, float) and not math.isfinite(value):
        found.append(where or "(top)")
        return None, found
    if isinstance(value, Mapping):
        return {k: finite_json(v, f"{where}.{k}" if where else str(k), found)[0] for k, v in value.items()}, found
    if isinstance(value, (list, tuple)):
        return [finite_json(v, f"{where}[{i}]", found)[0] for i, v in enumerate(value)], found
    return value, found


def write_json(path: str | os.PathLike, value: Any, indent: int | None = 1) -> list[str]:
    """Writes strict JSON: a NaN or an infinity (no JSON reader has to accept them) is written as null,
    and for a top-level object its paths are listed under "non_finite_as_null". Returns those paths."""
    clean, found = finite_json(value)
    if found and isinstance(clean, dict):
        clean["non_finite_as_null"] = found
    with open(path, "w", encoding="utf-8") as f:
        json.dump(clean, f, ensure_ascii=False, indent=indent, allow_nan=False)
        f.write("\n")
    return found


def write_report(out_dir: str | os.PathLike, title: str, summary: dict[str, Any],
                 sections: Sequence[Section]) -> dict[str, pathlib.Path]:
    """Writes the three files into `out_dir` (figures outside it are copied in) and returns their paths.

    A summary with a `judging` block (`judge_block`) gets its "Judging" section after the first one."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = [dataclasses.replace(s, figures=tuple(_local_copy(f, out) for f in s.figures))
                for s in sections]
    if summary.get("judging"):  # right after the headline section
        sections.insert(min(1, len(sections)), Section("Judging", judging_markdown(summary["judging"])))
    paths = {"summary": out / "summary.json", "markdown": out / "report.md", "html": out / "report.html"}
    write_json(paths["summary"], summary)
    md = [f"# {title}", ""]
    body = [f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        md += [f"## {s.title}", "", s.markdown.strip(), ""]
        md += [f"![{pathlib.Path(p).stem}]({p})" for p in s.figures] + [""] * bool(s.figures)
        body.append(f"<h2>{html.escape(s.title)}</h2>")
        body.append(markdown_to_html(s.markdown))
        body += [_embedded_png(out / p) for p in s.figures]
    paths["markdown"].write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    paths["html"].write_text(_HTML.format(title=html.escape(title), body="\n".join(body)), encoding="utf-8")
    return paths


def _local_copy(figure: str | os.PathLike, out: pathlib.Path) -> str:
    src = pathlib.Path(figure)
    if not src.exists():
        raise FileNotFoundError(f"report figure not found: {src}")
    dst = out / src.name
    if src.resolve() != dst.resolve():
        shutil.copyfile(src, dst)
    return src.name


def _embedded_png(path: pathlib.Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


def markdown_to_html(text: str) -> str:
    """The small Markdown subset reports use: #-headings, paragraphs, `- ` lists and pipe tables."""
    out: list[str] = []
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    for block in blocks:
        lines = block.strip().splitlines()
        if all(line.lstrip().startswith("|") for line in lines):
            out.append(_table_html(lines))
        elif all(line.startswith("- ") for line in lines):
            out.append("<ul>" + "".join(f"<li>{html.escape(l[2:])}</li>" for l in lines) + "</ul>")
        elif lines[0].startswith("#"):
            level = min(6, len(lines[0]) - len(lines[0].lstrip("#")) + 2)
            out.append(f"<h{level}>{html.escape(lines[0].lstrip('#').strip())}</h{level}>")
            if lines[1:]:
                out.append(markdown_to_html("\n".join(lines[1:])))
        else:
            out.append("<p>" + html.escape(" ".join(lines)) + "</p>")
    return "\n".join(out)


def _table_html(lines: list[str]) -> str:
    rows = [[c.strip().replace("\\|", "|") for c in _split_row(line)] for line in lines]
    header, body = rows[0], [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"


def _split_row(line: str) -> list[str]:
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    cells, current, i = [], "", 0
    while i < len(inner):
        if inner[i] == "\\" and inner[i + 1:i + 2] == "|":
            current += "\\|"
            i += 2
            continue
        if inner[i] == "|":
            cells.append(current)
            current = ""
        else:
            current += inner[i]
        i += 1
    return cells + [current]


_HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:left}}img{{max-width:100%}}</style>
</head><body>
{body}
</body></html>
"""
