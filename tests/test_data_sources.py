"""Sources: jsonl errors and counted skips, array_record round trip, a TFDS builder without TensorFlow."""
import json
import subprocess
import sys

import pytest

from data_pipelines import ArrayRecordSource, JsonlSource, write_array_record
from jaxwrite.common import InputError


def test_jsonl_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"body": "one"}\n{"body": oops}\n{"title": "x"}\n{"body": "  "}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"docs.jsonl:2: invalid JSON"):
        JsonlSource(str(path), field="body")
    src = JsonlSource(str(path), field="body", on_error="skip")
    assert len(src) == 2 and src.skipped == 2 and src.empty == 1
    assert src[0]["text"] == "one"
    assert "docs.jsonl:2" in src.first_skipped


def test_jsonl_missing_field_error(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "a"}\n{"title": "x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"docs.jsonl:2 field 'text': missing required field"):
        JsonlSource(str(path))


def test_array_record_round_trip(tmp_path):
    records = [{"id": str(i), "text": f"文本 {i}"} for i in range(7)]
    path = str(tmp_path / "docs.array_record")
    assert write_array_record(path, records) == 7
    src = ArrayRecordSource(path)
    assert len(src) == 7 and [src[i] for i in range(7)] == records


_BUILD_WITHOUT_TF = """
import importlib.util, json, sys
from data_pipelines.tfds_builders import WritingBench, decode_record
builder = WritingBench(source_dir=sys.argv[1], data_dir=sys.argv[2])
builder.download_and_prepare()
test = builder.as_data_source()['test']
recs = [decode_record(test[i]) for i in range(len(test))]
by_index = {r['index']: r for r in recs}
print(json.dumps({'n': len(recs), 'langs': sorted({r['lang'] for r in recs}),
                  'names': [c['name'] for c in json.loads(by_index[2]['checklist_json'])],
                  'query2': by_index[2]['query'][:40],
                  'tf_installed': importlib.util.find_spec('tensorflow') is not None,
                  'tf_imported': 'tensorflow' in sys.modules}))
"""


def test_writingbench_tfds_builder_without_tensorflow(data_dir, figure, tmp_path):
    # Runs in a fresh interpreter so "TensorFlow was never imported" is a fact about the build alone.
    out = subprocess.run([sys.executable, "-c", _BUILD_WITHOUT_TF, str(data_dir / "writingbench"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    with open(data_dir / "writingbench" / "benchmark_all.jsonl", encoding="utf-8") as f:
        second = [json.loads(line) for line in f][1]
    assert second["index"] == 2
    assert not got["tf_imported"]
    assert got["n"] == figure(1000, 41) and got["langs"] == ["en", "zh"]
    assert got["names"] == [c["name"] for c in second["checklist"]]
    assert got["query2"] == second["query"][:40]
