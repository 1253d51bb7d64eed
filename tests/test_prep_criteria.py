"""Criteria generation: schema validation, bounded re-asks with reject counts, failures, resume, bad input."""
import json

import pytest

from jaxwrite.common import InputError
from jaxwrite.chat import ChatResult
from jaxwrite.evals.writingbench_data import CRITERION_KEYS
from jaxwrite.prep import CRITERIA_PROMPT_ID, Labelling, generate_criteria, load_queries, parse_criteria_output, validate_checklist
from jaxwrite.prep.criteria import read_criteria


def _crit(name, **changes):
    c = {"name": name, "criteria_description": "checks " + name, "1-2": "poor", "3-4": "weak", "5-6": "fair",
         "7-8": "good", "9-10": "excellent"}
    return c | changes


GOOD = [_crit(f"Criterion {i}") for i in range(5)]


def test_valid_checklist_is_reordered_into_writingbench_key_order():
    shuffled = [dict(reversed(list(c.items()))) for c in GOOD]
    checklist, reason = validate_checklist(shuffled)
    assert reason is None and [tuple(c) for c in checklist] == [CRITERION_KEYS] * 5


@pytest.mark.parametrize("value, reason", [
    ("not a list", "not_a_list"),
    (GOOD[:4], "wrong_count"),
    (GOOD + [_crit("Sixth")], "wrong_count"),
    (GOOD[:4] + ["text"], "not_an_object"),
    (GOOD[:4] + [{k: v for k, v in GOOD[4].items() if k != "7-8"}], "missing_keys"),
    (GOOD[:4] + [_crit("X", score="1")], "unexpected_keys"),
    (GOOD[:4] + [_crit("X", **{"5-6": 5})], "non_string_value"),
    (GOOD[:4] + [_crit("X", **{"9-10": "  "})], "empty_field"),
    (GOOD[:4] + [_crit("")], "empty_field"),
    (GOOD[:4] + [_crit("Criterion 0")], "duplicate_names"),
    (GOOD[:4] + [_crit("X", **{"3-4": json.loads('"a\\udcce"')})], "invalid_unicode"),
])
def test_schema_breaks_are_rejected_with_a_reason(value, reason):
    assert validate_checklist(value) == (None, reason)


def test_parse_accepts_fences_wrappers_and_the_constrained_object_form():
    fenced = "Here you go:\n```json\n" + json.dumps(GOOD) + "\n```"
    assert parse_criteria_output(fenced)[1] is None
    assert parse_criteria_output(json.dumps({"criteria": GOOD}))[1] is None
    constrained = json.dumps({f"criterion_{i + 1}": c for i, c in enumerate(GOOD)})
    assert parse_criteria_output(constrained)[0] == GOOD
    assert parse_criteria_output("{not json")[1] == "invalid_json"
    assert parse_criteria_output("   ")[1] == "empty_output"


class ScriptedGenerator:
    """Answers each query's requests from a per-query script of texts (or errors), recording requests."""
    label = "fake:criteria"

    def __init__(self, scripts):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.requests = []

    def chat(self, requests):
        out = []
        for req in requests:
            self.requests.append(req)
            key = next(k for k in self.scripts if k in req.messages[1]["content"])
            answer = self.scripts[key].pop(0) if len(self.scripts[key]) > 1 else self.scripts[key][0]
            out.append(ChatResult(text="", error="HTTP 400") if answer is None else ChatResult(text=answer))
        return out


def _queries(tmp_path, records):
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_generate_with_reasks_failures_counts_and_resume(tmp_path):
    path = _queries(tmp_path, [
        {"id": 1, "query": "QUERY-A write a story", "domain1": "Lit", "domain2": "Fiction", "lang": "en"},
        {"id": "b", "query": "QUERY-B write a report", "domain2": "Reports"},
        {"id": 3, "query": "   "},
        {"id": 4, "query": "QUERY-D write a letter"}])
    generator = ScriptedGenerator({
        "QUERY-A": ["oops", json.dumps(GOOD[:4]), json.dumps(GOOD)],      # 2 rejects, then accepted
        "QUERY-B": [json.dumps(GOOD)],
        "QUERY-D": [None, json.dumps(GOOD[:4] + [_crit("Criterion 0")])]})  # never valid
    queries = load_queries(path)
    assert queries.empty_lines == [3]
    out = tmp_path / "criteria.jsonl"
    summary = generate_criteria(queries, generator, out, Labelling(attempts=3, progress=False))
    assert summary["written"] == 2 and summary["failed"] == 1 and summary["empty_query"] == 1
    assert summary["rejects"] == {"invalid_json": 1, "wrong_count": 1, "generator_error": 1, "duplicate_names": 2}
    records = [rec for _, rec in read_criteria(out)]
    assert [r["id"] for r in records] == ["b", 1]  # written as they are accepted
    a = records[1]
    assert a["domain2"] == "Fiction" and a["lang"] == "en" and a["attempts"] == 3
    assert a["criteria_prompt"] == CRITERIA_PROMPT_ID and a["checklist"] == GOOD
    # the re-ask keeps the conversation and names the problem
    third = [r for r in generator.requests if "QUERY-A" in r.messages[1]["content"]][2]
    assert [m["role"] for m in third.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "exactly 5" in third.messages[-1]["content"]
    failure = json.loads((tmp_path / "criteria.failures.jsonl").read_text())
    assert failure["id"] == 4 and failure["reasons"] == ["generator_error", "duplicate_names", "duplicate_names"]
    meta = json.loads((tmp_path / "criteria.jsonl.meta.json").read_text())
    assert meta["prompt_id"] == CRITERIA_PROMPT_ID and "own" in meta["prompt_note"]

    # resume: done ids are not asked again; the failed one is
    generator.scripts["QUERY-D"] = [json.dumps(GOOD)]
    before = len(generator.requests)
    summary = generate_criteria(queries, generator, out, Labelling(progress=False))
    assert summary["resumed"] == 2 and summary["written"] == 1
    assert len(generator.requests) - before == 1
    assert sorted(str(r["id"]) for _, r in read_criteria(out)) == ["1", "4", "b"]


class ShortContextGenerator(ScriptedGenerator):
    """A scripted generator that cannot take a re-ask: a conversation longer than [system, user] is an
    error, as a local model's context overflow is."""

    def chat(self, requests):
        short = [r for r in requests if len(r.messages) == 2]
        answers = iter(super().chat(short))
        for r in requests:
            if len(r.messages) > 2:
                self.requests.append(r)
        return [next(answers) if len(r.messages) == 2 else
                ChatResult(text="", error="field 'max_tokens': the schema needs at least 412 tokens, only 395 allowed")
                for r in requests]


def test_a_reask_past_the_context_falls_back_to_a_fresh_conversation(tmp_path):
    dup = json.dumps(GOOD[:4] + [_crit("Criterion 0")])
    path = _queries(tmp_path, [{"id": 1, "query": "QUERY-A"}, {"id": 2, "query": "QUERY-B"}])
    generator = ShortContextGenerator({"QUERY-A": [dup, json.dumps(GOOD)], "QUERY-B": [dup]})
    out = tmp_path / "criteria.jsonl"
    summary = generate_criteria(load_queries(path), generator, out, Labelling(attempts=3, progress=False))
    # A: rejected, its re-ask fails, the fresh ask is accepted. B: rejected 3 times, 2 fallbacks; no crash.
    assert summary["written"] == 1 and summary["failed"] == 1 and summary["fresh_fallbacks"] == 3
    assert summary["rejects"] == {"duplicate_names": 4}
    assert [r["id"] for _, r in read_criteria(out)] == [1]
    asked_a = [(len(r.messages), r.sampling.seed) for r in generator.requests if "QUERY-A" in r.messages[1]["content"]]
    assert [n for n, _ in asked_a] == [2, 4, 2] and len({seed for _, seed in asked_a}) == 3
    failure = json.loads((tmp_path / "criteria.failures.jsonl").read_text())
    assert failure["id"] == 2 and failure["reasons"] == ["duplicate_names"] * 3
    assert len(failure["reask_errors"]) == 2 and "only 395 allowed" in failure["reask_errors"][0]


class RefusingGenerator(ScriptedGenerator):
    """QUERY-A's requests are refused for good (a 400 past the context), QUERY-B's time out."""

    def chat(self, requests):
        self.requests.extend(requests)
        return [ChatResult(text="", error="HTTP 400: 18036 tokens leave no room in the 4096-token context",
                           retryable=False) if "QUERY-A" in r.messages[1]["content"] else
                ChatResult(text="", error="timed out after 60 s") for r in requests]


def test_permanent_and_transient_errors_are_told_apart(tmp_path, capsys):
    path = _queries(tmp_path, [{"id": 1, "query": "QUERY-A"}, {"id": 2, "query": "QUERY-B"}])
    generator = RefusingGenerator({})
    summary = generate_criteria(load_queries(path), generator, tmp_path / "c.jsonl", Labelling(attempts=3, progress=False))
    # The refused request is asked once (asking again cannot help); the timed-out one up to the limit.
    asked = ["A" if "QUERY-A" in r.messages[1]["content"] else "B" for r in generator.requests]
    assert asked.count("A") == 1 and asked.count("B") == 3
    assert summary["failed"] == 2 and summary["failed_by_kind"] == {"permanent": 1, "transient": 1, "unparseable": 0}
    failures = {f["id"]: f for f in map(json.loads, (tmp_path / "c.failures.jsonl").read_text().splitlines())}
    assert failures[1]["kind"] == "permanent" and failures[1]["attempts"] == 1
    assert failures[2]["kind"] == "transient" and failures[2]["attempts"] == 3
    err = capsys.readouterr().err
    # The server's own message, and advice that matches the kind: no "re-run to retry" for the 400.
    permanent = next(line for line in err.splitlines() if "permanent" in line)
    assert "4096-token context" in permanent and "re-run to retry" not in permanent
    assert any("transient" in line and "re-run to retry" in line for line in err.splitlines())


def test_fresh_reasks_never_grow_the_conversation(tmp_path):
    dup = json.dumps(GOOD[:4] + [_crit("Criterion 0")])
    generator = ScriptedGenerator({"QUERY-A": [dup, dup, json.dumps(GOOD)]})
    summary = generate_criteria(load_queries(_queries(tmp_path, [{"id": 1, "query": "QUERY-A"}])), generator,
                                tmp_path / "c.jsonl", Labelling(attempts=3, reask="fresh", progress=False))
    assert summary["written"] == 1 and summary["fresh_fallbacks"] == 0
    assert [len(r.messages) for r in generator.requests] == [2, 2, 2]
    assert len({r.sampling.seed for r in generator.requests}) == 3


def test_resume_with_another_generator_is_refused(tmp_path):
    path = _queries(tmp_path, [{"id": 1, "query": "QUERY-A"}])
    out = tmp_path / "c.jsonl"
    generate_criteria(load_queries(path), ScriptedGenerator({"QUERY-A": [json.dumps(GOOD)]}), out, Labelling(progress=False))
    other = ScriptedGenerator({"QUERY-A": [json.dumps(GOOD)]})
    other.label = "fake:other"
    with pytest.raises(InputError, match="generator"):
        generate_criteria(load_queries(path), other, out, Labelling(progress=False))


@pytest.mark.parametrize("records, message", [
    ([{"id": 1, "query": "a"}, {"id": "1", "query": "b"}], r"queries.jsonl:2 field 'id': expected unique ids"),
    ([{"id": 1, "query": 5}], r"queries.jsonl:1 field 'query': expected a string"),
    ([{"id": True, "query": "a"}], r"queries.jsonl:1 field 'id'"),
    ([{"query": "a"}], r"queries.jsonl:1 field 'id': missing"),
])
def test_bad_query_files(tmp_path, records, message):
    with pytest.raises(InputError, match=message):
        load_queries(_queries(tmp_path, records))


def test_criteria_file_with_broken_checklist_names_the_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": 1, "query": "q", "checklist": GOOD}) + "\n"
                    + json.dumps({"id": 2, "query": "q", "checklist": GOOD[:3]}) + "\n")
    with pytest.raises(InputError, match=r"c.jsonl:2 field 'checklist'.*wrong_count"):
        read_criteria(path)
