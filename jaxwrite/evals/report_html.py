"""report.html: the sections' Markdown rendered by markdown-it-py (CommonMark with tables; raw HTML in the
text is escaped, never passed through), headings shifted under the page's own <h1>/<h2>, and figures
embedded as PNG data URIs so the file can be mailed or uploaded alone."""
from __future__ import annotations

import base64
import functools
import html
import pathlib

# Section Markdown sits under the page title (h1) and the section title (h2): its "#" is an h3.
_HEADING_SHIFT = 2


@functools.cache
def _markdown():
    from markdown_it import MarkdownIt
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_to_html(text: str) -> str:
    """HTML of a section's Markdown (headings, paragraphs, lists, pipe tables, code spans)."""
    md = _markdown()
    tokens = md.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1:]) + _HEADING_SHIFT)}"
    return md.renderer.render(tokens, md.options, {}).strip()


def embedded_png(path: pathlib.Path) -> str:
    """A <figure> holding the PNG at `path` as a data URI."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


def html_page(title: str, body: str) -> str:
    return _HTML.format(title=html.escape(title), body=body)


_HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:left}}img{{max-width:100%}}</style>
</head><body>
{body}
</body></html>
"""
