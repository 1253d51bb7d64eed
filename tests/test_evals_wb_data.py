"""WritingBench data loading and schema validation."""
import json

import pytest

from jaxwrite.common import InputError
from jaxwrite.evals import load_requirement_subsets, load_writingbench
from jaxwrite.evals.writingbench_data import CRITERION_KEYS


def test_real_benchmark_and_subsets(data_dir, figure):
    queries = load_writingbench(data_dir)
    # The full set: indices 1..1000 (its README's figures); the sample: 41 of them, 1..12 among them.
    assert len(queries) == figure(1000, 41) and set(range(1, 13)) <= set(queries) <= set(range(1, 1001))
    assert sum(q.lang == "en" for q in queries.values()) == figure(555, 31)
    assert all(tuple(c) == CRITERION_KEYS for q in queries.values() for c in q.checklist)
    subsets = load_requirement_subsets(data_dir)
    assert {k: len(v.indices) for k, v in subsets.items()} == figure({"style": 442, "format": 498, "length": 222},
                                                                       {"style": 8, "format": 24, "length": 7})
    assert all(set(v.indices) <= set(queries) for v in subsets.values())
    assert sum(len(names) for names in subsets["format"].criteria.values()) == figure(511, 24)
    names = {c["name"] for c in queries[subsets["style"].indices[0]].checklist}
    assert set(subsets["style"].criteria[subsets["style"].indices[0]]) <= names


def _record(index=1, **change):
    crit = {k: f"{k} text" for k in CRITERION_KEYS}
    rec = {"index": index, "domain1": "Education", "domain2": "Lesson Plans", "lang": "en", "query": "q",
           "checklist": [dict(crit, name=f"n{i}") for i in range(5)]}
    return json.dumps(rec | change)


@pytest.mark.parametrize("second, message", [
    (_record(1), "benchmark_all.jsonl:2 field 'index': expected each index once, 1 repeats"),
    (_record(2, lang="fr"), "benchmark_all.jsonl:2 field 'lang': expected one of"),
    (_record(2, checklist=[]), "benchmark_all.jsonl:2 field 'checklist': expected a list of exactly 5"),
    (_record(2, checklist=[{"criteria_description": "d", "name": "n"}] * 5),
     "field 'checklist[0]': expected an object with keys"),
    (_record(2, checklist=[{k: "same" for k in CRITERION_KEYS}] * 5), "field 'checklist[1].name'"),
], ids=["duplicate", "lang", "four-criteria", "key-order", "repeated-name"])
def test_schema_errors_name_file_line_and_field(tmp_path, second, message):
    (tmp_path / "writingbench").mkdir()
    (tmp_path / "writingbench" / "benchmark_all.jsonl").write_text(_record(1) + "\n" + second + "\n")
    with pytest.raises(InputError) as err:
        load_writingbench(tmp_path)
    assert message in str(err.value)


def test_missing_data_dir_is_explained(tmp_path, monkeypatch):
    from jaxwrite.common import data_dir as dd
    monkeypatch.delenv("JAXWRITE_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))            # an empty download folder
    monkeypatch.setattr(dd, "checkout_data_dir", lambda: tmp_path / "none")  # no ../shared/data
    # The embedded sample holds a few queries, too few for a benchmark figure: not taken unasked.
    with pytest.raises(InputError, match=r"no data directory holds writingbench .*`jaxwrite data download`"):
        load_writingbench(None)
    with pytest.raises(InputError, match=r"lacks writingbench; fetch the data with `jaxwrite data download`"):
        load_writingbench(tmp_path)
