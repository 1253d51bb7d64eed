"""The per-sample pages (issue 27 §5): every query with its response (answer and plan apart) and each
criterion's score and reason, domain and language filters, the items two judges disagree on most first;
the arena's page lists the prompts whose two orders were decided differently first. Static HTML."""
import json
import re

from chat_server_support import scripted_chat_server
from jaxwrite.cli import main
from jaxwrite.evals.writingbench_data import load_writingbench


def _criterion_name(body, queries):
    user = body["messages"][1]["content"]
    return next(c["name"] for q in queries.values() for c in q.checklist if repr(c) in user)


def test_writingbench_page_shows_answer_plan_reasons_and_puts_disagreement_first(tmp_path, data_dir, capsys):
    queries = load_writingbench(data_dir)
    harsh = queries[11].checklist[2]["name"]
    responses = tmp_path / "r.jsonl"
    responses.write_text("".join(json.dumps({"index": i, "response": f"<think>plan {i}</think>\n<answer>Answer {i} "
                                             "<script>alert(1)</script></answer>"}) + "\n" for i in (10, 11)))

    def judge(score_of):
        return lambda body: json.dumps({"score": score_of(_criterion_name(body, queries)),
                                        "reason": f"reason for {_criterion_name(body, queries)}"})

    outputs = {}
    for name, score_of in (("a", lambda c: 8), ("b", lambda c: 2 if c == harsh else 8)):
        with scripted_chat_server(judge(score_of)) as url:
            outputs[name] = tmp_path / f"{name}.jsonl"
            assert main(["eval", "writingbench", "score", "--responses", str(responses), "--judge", url,
                         "--judge-model", "critic", "--output", str(outputs[name]), "--data-dir", str(data_dir),
                         "--indices", "10", "11", "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["eval", "writingbench", "report", "--scores", str(outputs["a"]), "--compare-scores",
                 str(outputs["b"]), "--data-dir", str(data_dir), "--output", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "samples.html").read_text()
    titles = re.findall(r"<summary><b>#(\d+) ", page)
    assert titles == ["11", "10"]                                     # judges disagree on 11: it comes first
    assert "widest criterion spread 6" in page
    assert f"reason for {harsh}" in page and "<b>2</b>" in page
    assert "plan 11" in page and "answer (what the judge saw)" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for q in (queries[10], queries[11]):
        assert f'<option value="{q.domain1}">' in page or f'<option value="{q.domain1.replace("&", "&amp;")}">' in page
        assert f'data-lang="{q.lang}"' in page
    assert "samples.html" in (tmp_path / "rep" / "report.md").read_text()


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_arena_page_puts_order_dependent_verdicts_first(tmp_path):
    prompts = _write(tmp_path / "p.jsonl", [{"id": 0, "prompt": "写一首诗", "domain": "poetry"},
                                            {"id": 1, "prompt": "Write a story.", "domain": "fiction"}])
    a = _write(tmp_path / "a.jsonl", [{"id": 0, "response": "诗 A"}, {"id": 1, "response": "Story A, longer."}])
    b = _write(tmp_path / "b.jsonl", [{"id": 0, "response": "诗 B"}, {"id": 1, "response": "Story B."}])

    def judge(body):   # prompt 0: always the first shown (order decides); prompt 1: the longer answer
        user = body["messages"][1]["content"]
        if "写一首诗" in user:
            return "First is better. [[A]]"
        return "[[A]]" if "Story A" in user.split("[Response B]")[0] else "[[B]]"

    with scripted_chat_server(judge) as url:
        assert main(["eval", "arena", "--responses", a, b, "--prompts", prompts, "--judge", url, "--judge-model", "j",
                     "--output", str(tmp_path / "out"), "--bootstrap", "10"]) == 0
    page = (tmp_path / "out" / "samples.html").read_text()
    assert re.findall(r"<summary><b>prompt (\d+)</b>", page) == ["0", "1"]
    assert "1 pair(s) decided differently in the two orders" in page and "First is better." in page
    assert 'data-lang="zh"' in page and 'data-domain="fiction"' in page and "Story A, longer." in page
