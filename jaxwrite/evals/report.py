"""One report writer for every evaluator: summary.json, report.md and a self-contained report.html.

Sections carry Markdown (headings, paragraphs, `- ` lists and pipe tables are rendered to HTML) and
PNG figures; the HTML embeds the figures as data URIs so the file can be mailed or uploaded alone,
while the Markdown links them by relative path.
"""
from __future__ import annotations

import base64
import dataclasses
import html
import json
import os
import pathlib
import shutil
from typing import Any, Sequence


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


def write_report(out_dir: str | os.PathLike, title: str, summary: dict[str, Any],
                 sections: Sequence[Section]) -> dict[str, pathlib.Path]:
    """Writes the three files into `out_dir` (figures outside it are copied in) and returns their paths."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = [dataclasses.replace(s, figures=tuple(_local_copy(f, out) for f in s.figures))
                for s in sections]
    paths = {"summary": out / "summary.json", "markdown": out / "report.md", "html": out / "report.html"}
    with open(paths["summary"], "w", encoding="utf-8") as f:
        json.dump(summary, f, ensure_ascii=False, indent=1)
        f.write("\n")
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
