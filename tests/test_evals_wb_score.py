"""WritingBench scoring loop: re-sampling, failures, resume without duplicates, seeds, validation, CLI."""
import json

import pytest

from jaxwrite.cli import main
from jaxwrite.common import InputError
from jaxwrite.chat import ChatResult
from jaxwrite.evals import WritingBenchScoring, load_writingbench, read_score_file, score_writingbench
from test_evals_judge_http import OpenAIStub


class ScriptedJudge:
    """In-process judge: `verdict(query_index, criterion_name, call_number) -> text`."""
    label = "scripted:test"

    def __init__(self, queries, verdict):
        self.by_query = {q.query: q.index for q in queries.values()}
        self.verdict = verdict
        self.requests = []
        self.calls: dict[tuple[int, str], int] = {}

    def chat(self, requests):
        out = []
        for req in requests:
            self.requests.append(req)
            user = req.messages[1]["content"]
            index = next(i for q, i in self.by_query.items() if f"** Query **\n```{q}```" in user)
            name = next(c["name"] for c in QUERIES[index].checklist if repr(c) in user)
            n = self.calls[(index, name)] = self.calls.get((index, name), 0) + 1
            out.append(ChatResult(text=self.verdict(index, name, n)))
        return out


QUERIES = {}


@pytest.fixture(scope="module")
def queries(data_dir):
    QUERIES.update(load_writingbench(data_dir))
    return QUERIES


def _responses(tmp_path, items):
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps({"index": i, "response": r}, ensure_ascii=False) + "\n"
                            for i, r in items), encoding="utf-8")
    return path


def _verdict(score):
    return f'```json\n{{"score": {score}, "reason": "because"}}\n```'


def test_scores_resamples_records_failures_and_resumes(tmp_path, data_dir, queries):
    responses = _responses(tmp_path, [(1, "<think>x</think>\n\nAnswer one"), (2, "Answer two"), (3, "")])
    bad_name = queries[2].checklist[4]["name"]
    first_name = queries[1].checklist[0]["name"]

    def verdict(index, name, n):
        if index == 2 and name == bad_name:
            return "I refuse to output JSON"                      # never valid -> failure
        if index == 1 and name == first_name and n < 3:
            return '{"score": "9", "reason": "string score"}'     # invalid twice, then valid
        return _verdict(index + 4)

    judge = ScriptedJudge(queries, verdict)
    out = tmp_path / "scores.jsonl"
    result = score_writingbench(responses, judge, out, WritingBenchScoring(data_dir, indices=(1, 2, 3, 4), attempts=4,
                                                                           batch_queries=2, progress=False))
    run = result["runs"][0]
    assert (run["scored"], run["failed"], run["failed_criteria"], run["missing"], run["empty_responses"]) == (
        2, 1, 1, 1, 1)
    assert judge.calls[(1, first_name)] == 3 and judge.calls[(2, bad_name)] == 4
    # the think block was stripped before judging, as the official current code does
    assert any("```Answer one```" in r.messages[1]["content"] for r in judge.requests)
    assert not any("<think>" in r.messages[1]["content"] for r in judge.requests)
    assert all((r.sampling.temperature, r.sampling.top_p, r.sampling.top_k, r.sampling.max_new_tokens)
               == (1.0, 0.95, None, 2048) for r in judge.requests)

    lines = [json.loads(l) for l in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(l["index"] for l in lines) == [1, 3]
    line1 = next(l for l in lines if l["index"] == 1)
    assert list(line1["scores"]) == [c["name"] for c in queries[1].checklist]
    assert line1["scores"][first_name] == [{"score": 5, "reason": "because"}]
    failures = [json.loads(l) for l in (tmp_path / "scores.failures.jsonl").read_text().splitlines()]
    assert failures == [{"index": 2, "criterion": bad_name, "seed": 0, "attempts": 4,
                         "error": "unparseable verdict", "permanent": False, "kind": "unparseable",
                         "last_output": "I refuse to output JSON"}]
    meta = json.loads((tmp_path / "scores.jsonl.meta.json").read_text())
    assert meta["strip_think"] is True and meta["judge"] == "scripted:test" and meta["seed"] == 0
    assert run["aggregate"]["count"] == 2 and run["aggregate"]["overall"] == pytest.approx((5 * 5 + 7 * 5) / 10)

    # Resume: only query 2 is asked again; nothing already scored is duplicated.
    judge2 = ScriptedJudge(queries, lambda i, n, k: _verdict(9))
    again = score_writingbench(responses, judge2, out,
                               WritingBenchScoring(data_dir, indices=(1, 2, 3, 4), progress=False))
    assert {i for i, _ in judge2.calls} == {2} and again["runs"][0]["resumed"] == 2
    assert sorted(read_score_file(out, queries)) == [1, 2, 3]

    # Changing a metric-defining setting on an existing file is refused.
    with pytest.raises(InputError, match="strip_think"):
        score_writingbench(responses, judge2, out,
                           WritingBenchScoring(data_dir, indices=(1,), answer_extraction="none", progress=False))


def test_several_seeds_write_one_file_each_and_summarise(tmp_path, data_dir, queries):
    responses = _responses(tmp_path, [(5, "A"), (6, "B")])
    judge = ScriptedJudge(queries, lambda i, n, k: _verdict(6))
    result = score_writingbench(responses, judge, tmp_path / "s.jsonl",
                                WritingBenchScoring(data_dir, seeds=(1, 2), progress=False))
    assert [r["scores_path"] for r in result["runs"]] == [str(tmp_path / "s.seed1.jsonl"),
                                                          str(tmp_path / "s.seed2.jsonl")]
    assert result["summary"]["overall"] == {"mean": 6.0, "std": 0.0, "n": 2}
    assert len({r.sampling.seed for r in judge.requests}) == 20  # distinct per seed, query and criterion


@pytest.mark.parametrize("line, message", [
    ({"index": 1001, "response": "x"}, "responses.jsonl:2 field 'index': expected a WritingBench index"),
    ({"index": 1, "response": "x"}, "responses.jsonl:2 field 'index': expected each index once"),
    ({"index": 7, "response": None}, "responses.jsonl:2 field 'response': expected a string"),
    ({"index": 7}, "responses.jsonl:2 field 'response': missing required field"),
])
def test_bad_response_files_fail_with_file_and_line(tmp_path, data_dir, queries, line, message):
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps({"index": 1, "response": "a"}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError) as err:
        score_writingbench(path, ScriptedJudge(queries, None), tmp_path / "s.jsonl",
                           WritingBenchScoring(data_dir, progress=False))
    assert message in str(err.value)


def test_cli_score_against_local_openai_server(tmp_path, data_dir, queries, capsys):
    responses = _responses(tmp_path, [(10, "An answer."), (11, "Another.")])
    with OpenAIStub(answer=lambda content: _verdict(8)) as server:
        rc = main(["eval", "writingbench", "score", "--responses", str(responses), "--judge", server.url,
                   "--judge-model", "critic", "--output", str(tmp_path / "s.jsonl"), "--data-dir", str(data_dir),
                   "--indices", "10", "11", "12", "--report-dir", str(tmp_path / "report")])
    result = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(server.calls) == 10
    assert result["runs"][0]["missing"] == 1 and result["runs"][0]["aggregate"]["overall"] == 8.0
    assert (tmp_path / "report" / "report.html").exists()
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["count"] == 2


def test_think_answer_responses_send_only_the_answer_and_count_malformed(tmp_path, data_dir, queries, capsys):
    responses = _responses(tmp_path, [
        (1, "<think>secret plan</think>\n<answer>Answer one"),                # stopped at </answer>
        (2, "<think>plan</think>\n\nNo answer tags"),                         # no <answer>
        (3, "<think>plan</think><answer>a</answer><answer>b</answer>"),       # two answers
        (4, "<think>only a plan</think>")])                                   # plan only
    judge = ScriptedJudge(queries, lambda i, n, k: _verdict(7))
    out = tmp_path / "scores.jsonl"
    result = score_writingbench(responses, judge, out,
                                WritingBenchScoring(data_dir, indices=(1, 2, 3, 4), progress=False))
    # the plan never reaches the critic (the official cut at '</think>\n\n' would have sent it whole)
    assert {r.messages[1]["content"].count("```Answer one```") for r in judge.requests} == {1}
    assert not any("secret plan" in r.messages[1]["content"] for r in judge.requests)
    assert {i for i, _ in judge.calls} == {1}
    run = result["runs"][0]
    assert (run["scored"], run["malformed"], run["missing"]) == (1, 3, 0)
    assert [l["index"] for l in map(json.loads, out.read_text().splitlines())] == [1]
    meta = json.loads((tmp_path / "scores.jsonl.meta.json").read_text())
    extraction = meta["answer_extraction"]
    assert (extraction["mode"], extraction["applied"], extraction["answers"], extraction["malformed"]) == (
        "auto", "think_answer", 1, 3)
    assert extraction["malformed_reasons"]["no <answer> block"] == 2
    assert extraction["malformed_reasons"]["2 <answer> blocks"] == 1
    assert [m["id"] for m in extraction["malformed_items"]] == [2, 3, 4]

    # the report (from the score file and its meta) shows the malformed ones and why
    assert main(["eval", "writingbench", "report", "--scores", str(out), "--data-dir", str(data_dir),
                 "--output", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Answer extraction" in md and "| 2 <answer> blocks | 1 |" in md and "- 4: no <answer> block" in md
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["answer_extraction"]["malformed"] == 3 and summary["count"] == 1

    # answer extraction "none" sends the text unchanged (and is a different metric)
    with pytest.raises(InputError, match="answer_extraction"):
        score_writingbench(responses, judge, out,
                           WritingBenchScoring(data_dir, indices=(1,), answer_extraction="none", progress=False))
    raw = score_writingbench(responses, judge, tmp_path / "raw.jsonl",
                             WritingBenchScoring(data_dir, indices=(1, 2), answer_extraction="none", progress=False))
    assert raw["answer_extraction"]["applied"] == "none" and raw["runs"][0]["scored"] == 2


def test_meta_from_before_answer_extraction_resumes_plain_models_only(tmp_path, data_dir, queries):
    out = tmp_path / "scores.jsonl"
    judge = ScriptedJudge(queries, lambda i, n, k: _verdict(6))
    plain = _responses(tmp_path, [(1, "<think>r</think>\n\nAnswer"), (2, "Two")])
    score_writingbench(plain, judge, out, WritingBenchScoring(data_dir, indices=(1,), progress=False))
    meta_path = tmp_path / "scores.jsonl.meta.json"
    old = json.loads(meta_path.read_text())
    del old["answer_extraction"]                     # as written before: strip_think only
    meta_path.write_text(json.dumps(old))
    again = score_writingbench(plain, judge, out, WritingBenchScoring(data_dir, indices=(1, 2), progress=False))
    assert again["runs"][0]["resumed"] == 1 and again["answer_extraction"]["applied"] == "official_strip"
    meta_path.write_text(json.dumps(old))
    think_answer = _responses(tmp_path, [(1, "<think>r</think><answer>Answer</answer>")])
    with pytest.raises(InputError, match="answer_extraction"):
        score_writingbench(think_answer, judge, out, WritingBenchScoring(data_dir, indices=(1,), progress=False))
