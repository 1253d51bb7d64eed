"""WritingBench aggregation against hand-computed numbers, score-file validation, the aggregate CLI."""
import json

import pytest

from jaxwrite.cli import main
from jaxwrite.common import InputError
from jaxwrite.evals import (RequirementSubset, WritingBenchQuery, aggregate_writingbench, load_writingbench,
                            read_score_file, summarize_seeds)
from jaxwrite.evals.writingbench_data import CRITERION_KEYS

NAMES = ("c1", "c2", "c3", "c4", "c5")


def _query(index, domain1, domain2, lang):
    checklist = tuple({k: (n if k == "name" else "x") for k in CRITERION_KEYS} for n in NAMES)
    return WritingBenchQuery(index, domain1, domain2, lang, f"query {index}", checklist)


QUERIES = {1: _query(1, "A", "A1", "en"), 2: _query(2, "A", "A2", "zh"),
           3: _query(3, "B", "B1", "en"), 4: _query(4, "B", "B1", "zh")}
SUBSETS = {"style": RequirementSubset((1, 2, 4), {1: ("c3", "c5"), 2: ("c1",), 4: ("c1",)}),
           "format": RequirementSubset((3,), {3: ("c2",)}),
           "length": RequirementSubset((4,), {4: ("c1",)})}


def _line(index, scores):
    return json.dumps({"index": index, "scores": {n: [{"score": s, "reason": "r"} for s in reps]
                                                  for n, reps in scores.items()}})


def _write(tmp_path, lines, name="scores.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_aggregate_matches_hand_computation(tmp_path):
    path = _write(tmp_path, [
        _line(1, {"c1": [8], "c2": [6], "c3": [7, 9], "c4": [5], "c5": [10]}),  # 45 / 6 evals, S = 7.5
        _line(2, {n: [4] for n in NAMES}),                                      # S = 4
        _line(3, {"c1": [2], "c2": [3], "c3": [4], "c4": [5], "c5": [6]}),       # S = 4
    ])
    result = aggregate_writingbench(read_score_file(path, QUERIES), QUERIES, SUBSETS)
    assert result["overall"] == pytest.approx(85 / 16)  # micro over all 16 evaluations
    assert result["count"] == 3
    assert result["domain1"] == pytest.approx({"A": 5.75, "B": 4.0})
    assert result["domain2"] == pytest.approx({"A1": 7.5, "A2": 4.0, "B1": 4.0})
    assert result["lang"] == pytest.approx({"en": 5.75, "zh": 4.0})
    assert result["style_R"] == pytest.approx(5.75)      # query 4 unscored
    assert result["style_C"] == pytest.approx(22 / 3)    # c3 mean 8, c5 10, q2 c1 4
    assert (result["format_R"], result["format_C"]) == (4.0, 3.0)
    assert result["length_R"] is None and result["length_C"] is None


@pytest.mark.parametrize("line, message", [
    ('{"index": 1, "scores": ', "scores.jsonl:2: invalid JSON"),
    (_line(9, {"c1": [5]}), "scores.jsonl:2 field 'index': expected a WritingBench index"),
    (_line(1, {"c1": [5]}), "scores.jsonl:2 field 'index': expected each index once, 1 repeats"),
    (_line(2, {"c1": [11]}), "scores.jsonl:2 field 'scores.c1': expected a score between 1 and 10, found 11"),
    (_line(2, {"c1": [0]}), "field 'scores.c1': expected a score between 1 and 10, found 0"),
    (_line(2, {"zz": [5]}), "scores.jsonl:2 field 'scores.zz': expected a criterion of query 2"),
    (json.dumps({"index": 2, "scores": {"c1": [{"score": "5"}]}}), "found '5'"),
    (json.dumps({"index": 2, "scores": {"c1": []}}), "expected a non-empty list"),
])
def test_invalid_score_files_fail_with_file_and_line(tmp_path, line, message):
    path = _write(tmp_path, [_line(1, {"c1": [5]}), line])
    with pytest.raises(InputError) as err:
        read_score_file(path, QUERIES)
    assert message in str(err.value)


def test_seed_summary_mean_and_std():
    a = {"overall": 6.0, "count": 2, "domain1": {"A": 5.0}, "lang": {"en": 6.0, "zh": None}}
    b = {"overall": 8.0, "count": 2, "domain1": {"A": 7.0, "B": 3.0}, "lang": {"en": 8.0, "zh": None}}
    s = summarize_seeds([a, b])
    assert s["overall"] == pytest.approx({"mean": 7.0, "std": 2 ** 0.5, "n": 2})
    assert s["domain1"]["B"] == {"mean": 3.0, "std": 0.0, "n": 1}
    assert s["lang"]["zh"] is None and s["count"] == [2, 2]


def test_cli_aggregate_contract(tmp_path, data_dir, capsys):
    queries = load_writingbench(data_dir)
    lines = [_line(i, {c["name"]: [s] for c in queries[i].checklist}) for i, s in ((1, 6), (2, 8))]
    scores, out = _write(tmp_path, lines), tmp_path / "agg" / "out.json"
    rc = main(["eval", "writingbench", "aggregate", "--scores", str(scores), "--data-dir", str(data_dir),
               "--output", str(out)])
    printed = json.loads(capsys.readouterr().out)
    assert rc == 0 and printed == json.loads(out.read_text(encoding="utf-8"))
    assert set(printed) == {"overall", "count", "domain1", "domain2", "lang", "style_R", "style_C",
                            "format_R", "format_C", "length_R", "length_C", "judging"}
    assert printed["judging"]["judge"] is None  # a score file made elsewhere: no .meta.json
    assert printed["overall"] == 7.0 and printed["count"] == 2
    assert printed["lang"] == {"en": 8.0, "zh": 6.0}  # index 1 is zh, index 2 en
    assert printed["domain1"] == {"Academic & Engineering": 7.0}


def test_cli_aggregate_bad_file_is_one_line_error(tmp_path, data_dir, capsys):
    scores = _write(tmp_path, ['{"index": 1, "scores": {"x": [{"score": 5}]}}', '{"index": 5000, "scores": {}}'])
    rc = main(["eval", "writingbench", "aggregate", "--scores", str(scores), "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and f"{scores}:1 field 'scores.x'" in err
