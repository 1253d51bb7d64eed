"""One report writer for every evaluator: summary.json, report.md and a self-contained report.html.

Sections carry Markdown (`markdown_table` builds its tables) and PNG figures; the Markdown links the
figures by relative path, the HTML (report_html) embeds them. A summary's `judging` block (judging.py)
becomes the "Judging" section, so the Markdown and the JSON say the same. summary.json is strict JSON
(report_json).
"""
from __future__ import annotations

import dataclasses
import html
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


def write_report(out_dir: str | os.PathLike, title: str, summary: dict[str, Any],
                 sections: Sequence[Section]) -> dict[str, pathlib.Path]:
    """Writes the three files into `out_dir` (figures outside it are copied in) and returns their paths.

    A summary with a `judging` block (`judging.judge_block`) gets its "Judging" section after the first one."""
    from jaxwrite.evals.judging import judging_markdown
    from jaxwrite.evals.report_html import embedded_png, html_page, markdown_to_html
    from jaxwrite.evals.report_json import write_json
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
        body += [embedded_png(out / p) for p in s.figures]
    paths["markdown"].write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    paths["html"].write_text(html_page(title, "\n".join(body)), encoding="utf-8")
    return paths


def _local_copy(figure: str | os.PathLike, out: pathlib.Path) -> str:
    src = pathlib.Path(figure)
    if not src.exists():
        raise FileNotFoundError(f"report figure not found: {src}")
    dst = out / src.name
    if src.resolve() != dst.resolve():
        shutil.copyfile(src, dst)
    return src.name
