"""Top-fraction-per-subdomain arithmetic and the filtered SFT set built from criteria/responses/scores files."""
import json

import pytest

from jaxwrite.common import InputError
from jaxwrite.prep import Scored, build_filtered_sft, keep_count, top_fraction_per_group
from jaxwrite.prep.top_fraction import summarize_groups


@pytest.mark.parametrize("n, fraction, rounding, expected", [
    (7, 0.5, "floor", 3), (7, 0.5, "ceil", 4), (7, 0.5, "round_half_up", 4),
    (5, 0.5, "round_half_up", 3), (4, 0.5, "floor", 2), (4, 0.5, "ceil", 2),
    (10, 0.3, "floor", 3),  # exact decimal: 0.3 * 10 is 3, not 2.999...
    (10, 0.3, "ceil", 3), (1, 0.5, "floor", 0), (1, 0.5, "ceil", 1), (3, 1.0, "floor", 3),
    (24000, 0.5, "floor", 12000),
])
def test_keep_count(n, fraction, rounding, expected):
    assert keep_count(n, fraction, rounding) == expected


def test_keep_count_rejects_bad_settings():
    with pytest.raises(ValueError):
        keep_count(4, 0.0)
    with pytest.raises(ValueError):
        keep_count(4, 0.5, "banker")


def test_exact_fraction_per_group_with_deterministic_ties():
    # group a: 6 records (3 kept), two tied at the cut; group b: 5 records (floor -> 2)
    items = [Scored("a", 9.0, ("q1", 0)), Scored("a", 5.0, ("q2", 1)), Scored("a", 7.0, ("q3", 0)),
             Scored("a", 5.0, ("q2", 0)), Scored("a", 1.0, ("q4", 0)), Scored("a", 2.0, ("q5", 0)),
             Scored("b", 3.0, ("q6", 0)), Scored("b", 8.0, ("q7", 0)), Scored("b", 8.0, ("q6", 1)),
             Scored("b", 4.0, ("q8", 0)), Scored("b", 6.0, ("q9", 0))]
    kept, groups = top_fraction_per_group(items, 0.5)
    # a: 9, 7, and of the two 5.0 the one with the smaller tiebreak (q2, 0) -> index 3
    assert kept == [0, 2, 3, 7, 8]
    assert [(g.group, g.records, g.kept, g.min_kept_score) for g in groups] == [("a", 6, 3, 5.0), ("b", 5, 2, 8.0)]
    # file order does not change the kept set
    order = [10, 3, 5, 1, 0, 9, 2, 8, 4, 7, 6]
    kept2, _ = top_fraction_per_group([items[i] for i in order], 0.5)
    assert sorted(order[i] for i in kept2) == kept
    # other roundings on the same groups
    assert [g.kept for g in top_fraction_per_group(items, 0.5, rounding="ceil")[1]] == [3, 3]
    assert summarize_groups(groups) == {"groups": 2, "records": 11, "kept": 5, "too_small": []}


def test_small_groups_are_never_silent():
    items = [Scored("big", float(s), (str(s), 0)) for s in range(1, 5)] + [Scored("tiny", 5.0, ("t", 0))]
    with pytest.raises(InputError, match=r"1 group\(s\) too small.*tiny \(1 records, keeps 0\)"):
        top_fraction_per_group(items, 0.5)
    kept, groups = top_fraction_per_group(items, 0.5, on_small="keep")
    assert kept == [2, 3, 4] and groups[1].too_small and groups[1].kept == 1
    kept, groups = top_fraction_per_group(items, 0.5, on_small="drop")
    assert kept == [2, 3] and groups[1].kept == 0
    # k == 0 also counts as too small even with enough records
    _, groups = top_fraction_per_group(items[:4], 0.1, on_small="drop")
    assert groups[0].too_small and groups[0].kept == 0


def _criterion(name):
    return {"name": name, "criteria_description": "d", "1-2": "a", "3-4": "b", "5-6": "c", "7-8": "d", "9-10": "e"}


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_build_filtered_sft_files_and_report(tmp_path):
    checklist = [_criterion(f"c{i}") for i in range(5)]
    criteria = _write(tmp_path / "criteria.jsonl", [
        {"id": "q1", "domain1": "D", "domain2": "Essays", "lang": "en", "query": "Write an essay.", "checklist": checklist},
        {"id": "q2", "domain1": "D", "domain2": "Essays", "lang": "en", "query": "Another essay.", "checklist": checklist},
        {"id": 3, "domain1": "E", "domain2": "Letters", "lang": "zh", "query": "写一封信。", "checklist": checklist}])
    responses, scores = [], []
    values = {"q1": [8.0, 2.0], "q2": [6.0, 6.0], 3: [4.0, 9.0]}
    for qid, vals in values.items():
        for k, v in enumerate(vals):
            rid = f"{qid}#{k}"
            responses.append({"response_id": rid, "id": qid, "sample": k, "response": f"text {rid}",
                              "finish_reason": "stop"})
            if rid != "3#1":  # 3#1 left unscored (a critic failure)
                scores.append({"response_id": rid, "id": qid, "sample": k, "score": v})
    _write(tmp_path / "responses.jsonl", responses)
    _write(tmp_path / "scores.jsonl", scores)
    with pytest.raises(InputError, match="Letters"):
        build_filtered_sft(criteria, tmp_path / "responses.jsonl", tmp_path / "scores.jsonl", tmp_path / "out")
    summary = build_filtered_sft(criteria, tmp_path / "responses.jsonl", tmp_path / "scores.jsonl",
                                 tmp_path / "out", on_small="keep")
    kept = [json.loads(line) for line in (tmp_path / "out" / "kept.jsonl").read_text().splitlines()]
    all_ = [json.loads(line) for line in (tmp_path / "out" / "all.jsonl").read_text().splitlines()]
    assert len(all_) == 5 and summary["unscored"] == 1
    # Essays: 4 scored -> 2 kept (8.0 and the tied 6.0s broken by (id, sample): q2#0)
    assert [r["response_id"] for r in kept] == ["q1#0", "q2#0", "3#0"]
    assert kept[0]["query"] == "Write an essay." and kept[0]["response"] == "text q1#0" and kept[0]["domain2"] == "Essays"
    assert summary["per_group"]["Essays"] == {"records": 4, "kept": 2, "too_small": False, "min_kept_score": 6.0}
    assert summary["per_group"]["Letters"]["too_small"] and summary["too_small"] == ["Letters"]
    report = tmp_path / "out" / "report"
    assert {"summary.json", "report.md", "report.html", "critic_scores.png"} <= {p.name for p in report.iterdir()}
    assert "| Essays | 4 | 2 | 6.00 |" in (report / "report.md").read_text()


def test_scores_file_errors_name_line_and_field(tmp_path):
    checklist = [_criterion(f"c{i}") for i in range(5)]
    criteria = _write(tmp_path / "c.jsonl", [{"id": "q", "domain2": "S", "query": "x", "checklist": checklist}])
    _write(tmp_path / "r.jsonl", [{"response_id": "q#0", "id": "q", "sample": 0, "response": "r"}])
    _write(tmp_path / "s.jsonl", [{"response_id": "q#0", "score": 3}, {"response_id": "q#0", "score": 4}])
    with pytest.raises(InputError, match=r"s.jsonl:2 field 'response_id'"):
        build_filtered_sft(criteria, tmp_path / "r.jsonl", tmp_path / "s.jsonl", tmp_path / "o")
    _write(tmp_path / "s.jsonl", [{"response_id": "q#0", "score": 11}])
    with pytest.raises(InputError, match=r"s.jsonl:1 field 'score'"):
        build_filtered_sft(criteria, tmp_path / "r.jsonl", tmp_path / "s.jsonl", tmp_path / "o")
