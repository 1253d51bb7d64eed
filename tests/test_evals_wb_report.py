"""The shared report writer and the WritingBench report."""
import json
import re

from jaxwrite.evals import Section, bar_chart, markdown_table, write_report, writingbench_report
from jaxwrite.evals.report_html import markdown_to_html


def test_write_report_writes_three_files_with_embedded_figure(tmp_path):
    png = bar_chart({"a": 1.0, "b": 2.5}, tmp_path / "bars.png", "t", "value")
    table = markdown_table(["name", "score"], [["x|y", 1.234], ["z", None]])
    paths = write_report(tmp_path / "out", "My eval", {"score": 1.5, "名": "值"},
                         [Section("Scores", "Intro line.\n\n" + table + "\n\n- one\n- two", (png,))])
    assert json.loads(paths["summary"].read_text(encoding="utf-8")) == {"score": 1.5, "名": "值"}
    md = paths["markdown"].read_text(encoding="utf-8")
    assert md.startswith("# My eval\n") and "| x\\|y | 1.23 |" in md and "| z | - |" in md
    assert "![bars](bars.png)" in md and (tmp_path / "out" / "bars.png").exists()
    page = paths["html"].read_text(encoding="utf-8")
    assert "<td>x|y</td><td>1.23</td>" in re.sub(r">\s+<", "><", page) and "<li>two</li>" in page
    assert 'src="data:image/png;base64,iVBOR' in page


def test_markdown_subset_is_escaped():
    assert markdown_to_html("## Head\n<b>bold</b>") == "<h4>Head</h4>\n<p>&lt;b&gt;bold&lt;/b&gt;</p>"


def test_writingbench_report_uses_leaderboard_scale(tmp_path):
    aggregate = {"overall": 7.25, "count": 3, "domain1": {"Education": 7.0, "Politics & Law": 7.5},
                 "domain2": {"Lesson Plans": 7.0, "Legal Opinions": 7.5}, "lang": {"en": 7.25, "zh": None},
                 "style_R": 7.0, "style_C": 6.5, "format_R": None, "format_C": None,
                 "length_R": 8.0, "length_C": 8.25}
    paths = writingbench_report(aggregate, tmp_path, judge_note="Judge: test.")
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "| 72.50 | 7.25 | 3 | 72.50 | - |" in md
    assert "| Politics & Law | 75.00 |" in md and "| length | 80.00 | 82.50 |" in md
    assert (tmp_path / "writingbench_domains.png").stat().st_size > 1000
    summary = json.loads(paths["summary"].read_text())
    assert summary.pop("judging")["judge"] is None and summary == aggregate  # no judge given: not recorded
    assert "- Judge: none (not recorded)" in md
