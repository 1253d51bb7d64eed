"""The per-sample page of a report (`samples.html`): every item with what was judged and each verdict with
its reason, so a reader can see why a score is what it is. One static HTML file, no server: the items are
written out in full, and a few lines of inline script filter them by domain and language (without
script every item shows).

Items are ordered by disagreement, largest first: for WritingBench the widest spread of one criterion's
score across the score files given (seeds of one run, or several judges), then of the query's mean; for
the arena the number of model pairs whose two orders the judge decided differently. Ties keep the
benchmark's order.
"""
from __future__ import annotations

import dataclasses
import html
import os
import statistics
from typing import Any, Mapping, Sequence

from jaxwrite.common import read_jsonl
from jaxwrite.text import ExtractedAnswer


@dataclasses.dataclass(frozen=True)
class SampleItem:
    """One item of the page: `body` is HTML built here (every text escaped)."""
    key: str
    title: str
    domain: str
    lang: str
    disagreement: float
    summary: str
    body: str


def write_samples_page(path: str | os.PathLike, title: str, intro: str, items: Sequence[SampleItem]) -> str:
    """Writes the page, items by disagreement (largest first), with domain and language filters."""
    ordered = sorted(enumerate(items), key=lambda pair: (-pair[1].disagreement, pair[0]))
    domains = sorted({it.domain for it in items})
    langs = sorted({it.lang for it in items})
    options = lambda values: "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)  # noqa: E731
    filters = (f'<p>Domain <select id="domain"><option value="">all</option>{options(domains)}</select> '
               f'Language <select id="lang"><option value="">all</option>{options(langs)}</select> '
               f'<span id="shown">{len(items)}</span> of {len(items)} items shown</p>')
    body = "\n".join(f'<details class="item" data-domain="{_e(it.domain)}" data-lang="{_e(it.lang)}">'
                     f'<summary><b>{_e(it.title)}</b> · {_e(it.domain)} · {_e(it.lang)} · {it.summary}</summary>'
                     f"{it.body}</details>" for _, it in ordered)
    page = _PAGE.format(title=_e(title), intro=intro, filters=filters, body=body)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return os.fspath(path)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _block(label: str, text: str | None, open_: bool = False) -> str:
    if text is None:
        return ""
    return (f'<details{" open" if open_ else ""}><summary>{_e(label)} ({len(text)} characters)</summary>'
            f"<pre>{_e(text)}</pre></details>")


def _response(extracted: ExtractedAnswer | None, raw: str | None = None) -> str:
    """The judged answer and the plan apart (a malformed think/answer response: its problems)."""
    if extracted is None:
        return "<p><i>no response</i></p>"
    if extracted.text is None:
        return (f"<p><i>malformed think/answer response, not scored: {_e('; '.join(extracted.problems))}</i></p>"
                + _block("plan", extracted.plan) + _block("raw response", raw))
    return _block("answer (what the judge saw)", extracted.text, open_=True) + _block("plan", extracted.plan)


def guess_lang(text: str) -> str:
    """"zh" when CJK characters are at least a fifth of the letters, else "en" (for prompts that carry none)."""
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    letters = sum(1 for ch in text if ch.isalpha())
    return "zh" if letters and cjk / letters >= 0.2 else "en"


# ----------------------------------------------------------------------------- WritingBench

def read_verdicts(path: str | os.PathLike) -> dict[int, dict[str, dict[str, Any]]]:
    """{index: {criterion: first verdict {score, reason, ...}}} of a score file already checked by
    `read_score_file`."""
    return {rec["index"]: {name: verdicts[0] for name, verdicts in rec["scores"].items()}
            for _, rec in read_jsonl(path)}


def writingbench_items(queries: Mapping[int, Any], verdicts: Mapping[str, Mapping[int, Mapping[str, dict]]],
                       answers: Mapping[int, ExtractedAnswer], raw: Mapping[int, str] | None = None
                       ) -> list[SampleItem]:
    """One item per query scored in any file. verdicts: {file label (a seed, a judge): `read_verdicts`};
    answers: the response file under the run's answer extraction."""
    labels = list(verdicts)
    scored = sorted({i for by_index in verdicts.values() for i in by_index})
    items = []
    for index in scored:
        q = queries[index]
        rows, spreads, means = [], [], []
        for c in q.checklist:
            got = [verdicts[label].get(index, {}).get(c["name"]) for label in labels]
            scores = [v["score"] for v in got if v is not None]
            spreads.append(max(scores) - min(scores) if len(scores) > 1 else 0)
            cells = "".join(f"<td><b>{v['score']}</b> {_e(v.get('reason', ''))}</td>" if v is not None
                            else "<td><i>not scored</i></td>" for v in got)
            rows.append(f"<tr><th>{_e(c['name'])}<br><small>{_e(c.get('criteria_description', ''))}</small></th>"
                        f"{cells}</tr>")
        for label in labels:
            per = verdicts[label].get(index)
            if per:
                means.append(statistics.fmean(v["score"] for v in per.values()))
        spread = max(spreads, default=0)
        mean_range = max(means) - min(means) if len(means) > 1 else 0.0
        head = "".join(f"<th>{_e(label)}</th>" for label in labels)
        table = f"<table><tr><th>criterion</th>{head}</tr>{''.join(rows)}</table>"
        summary = ("mean " + " / ".join(f"{m:.2f}" for m in means)
                   + (f" · widest criterion spread {spread}" if len(labels) > 1 else ""))
        body = (_block("query", q.query) + f"<h4>Response</h4>{_response(answers.get(index), (raw or {}).get(index))}"
                + f"<h4>Criteria</h4>{table}")
        items.append(SampleItem(str(index), f"#{index} {q.domain2}", q.domain1, q.lang, spread + mean_range / 10,
                                summary, body))
    return items


# ----------------------------------------------------------------------------- arena

def arena_items(prompts: Mapping[Any, str], answers: Mapping[str, Mapping[Any, ExtractedAnswer]],
                records: Sequence[Mapping[str, Any]], prompt_fields: Mapping[str, Mapping[str, Any]] | None = None
                ) -> list[SampleItem]:
    """One item per prompt judged: each model's answer (and plan), each judgement with its verdict and the
    judge's text. prompt_fields: {str(prompt id): the prompt record} for its domain and language."""
    by_prompt: dict[str, list[Mapping[str, Any]]] = {}
    for rec in records:
        by_prompt.setdefault(str(rec["prompt_id"]), []).append(rec)
    items = []
    for pid, prompt in prompts.items():
        recs = by_prompt.get(str(pid))
        if not recs:
            continue
        fields = (prompt_fields or {}).get(str(pid), {})
        winners: dict[frozenset, set] = {}
        rows = []
        for rec in sorted(recs, key=lambda r: (r["model_a"], r["model_b"])):
            verdict = rec.get("verdict")
            winner = {"A": rec["model_a"], "B": rec["model_b"], "C": "tie"}.get(verdict, "no verdict")
            if verdict is not None:
                winners.setdefault(frozenset((rec["model_a"], rec["model_b"])), set()).add(winner)
            rows.append(f"<tr><td>{_e(rec['model_a'])} (A) vs {_e(rec['model_b'])} (B)</td><td><b>{_e(winner)}</b>"
                        f"</td><td>{_block('judgement', rec.get('judgement') or '')}</td></tr>")
        split = sum(len(w) > 1 for w in winners.values())
        models = sorted({r["model_a"] for r in recs} | {r["model_b"] for r in recs})
        shown = "".join(f"<h4>{_e(m)}</h4>{_response(answers.get(m, {}).get(pid))}" for m in models)
        body = (_block("prompt", prompt) + shown + "<h4>Judgements</h4><table><tr><th>pair (order)</th>"
                "<th>winner</th><th>judge's text</th></tr>" + "".join(rows) + "</table>")
        summary = f"{len(recs)} judgements" + (f" · {split} pair(s) decided differently in the two orders" if split
                                               else "")
        domain = str(fields.get("domain1") or fields.get("domain") or "-")
        lang = str(fields.get("lang") or guess_lang(prompt))
        items.append(SampleItem(str(pid), f"prompt {pid}", domain, lang, float(split), summary, body))
    return items


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:70em;margin:2em auto}}table{{border-collapse:collapse;margin:.5em 0}}
td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:left;vertical-align:top}}
pre{{white-space:pre-wrap;background:#f7f7f7;padding:.5em;max-height:30em;overflow:auto}}
details.item{{border-top:1px solid #999;padding:.4em 0}}</style>
</head><body>
<h1>{title}</h1>
{intro}
{filters}
{body}
<script>
function apply() {{
  var d = document.getElementById("domain").value, l = document.getElementById("lang").value, n = 0;
  document.querySelectorAll("details.item").forEach(function (el) {{
    var show = (!d || el.dataset.domain === d) && (!l || el.dataset.lang === l);
    el.style.display = show ? "" : "none";
    n += show ? 1 : 0;
  }});
  document.getElementById("shown").textContent = n;
}}
document.getElementById("domain").onchange = apply;
document.getElementById("lang").onchange = apply;
</script>
</body></html>
"""
