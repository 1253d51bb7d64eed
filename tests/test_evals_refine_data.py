"""RefineBench loader: the two real sample files, de-duplication, materials, validation errors."""
import json
import shutil

import pytest

from jaxwrite.common import InputError
from jaxwrite.evals.refinebench_data import SAMPLE_FILES, load_refinebench, problem_prompt

CONFLICTS = ["refinebench-000579", "refinebench-000581", "refinebench-000586", "refinebench-000601"]


def test_real_samples_dedupe_and_conflicts(full_data_dir):
    data_dir = full_data_dir   # figures of the full data sets
    data = load_refinebench(data_dir)
    assert len(data.problems) == 138
    assert data.conflicts == CONFLICTS
    by_index = {p.index: p for p in data.problems}
    assert all(by_index[i].source == SAMPLE_FILES[0] for i in CONFLICTS)
    assert sum(p.source == SAMPLE_FILES[0] for p in data.problems) == 109
    assert {p.exam_type for p in data.problems} == {"Exact Match", "Free Form"}
    assert all(2 <= len(p.checklist) <= 20 for p in data.problems)


def test_materials_read_from_content_and_placed_before_question(full_data_dir):
    data_dir = full_data_dir   # figures of the full data sets
    by_index = {p.index: p for p in load_refinebench(data_dir).problems}
    p = by_index["refinebench-000839"]  # materials stored as Python-literal dicts with 'content'
    assert len(p.context) == 2 and p.context[0].startswith("[Passage B] Data:")
    prompt = problem_prompt(p)
    assert prompt.index("[Passage B]") < prompt.index("[Passage C]") < prompt.index(p.question)
    assert "{'content'" not in prompt
    q = by_index["refinebench-000862"]  # passages list + materials as one plain string
    assert q.context[0].startswith("<Passage1>") and q.context[-1].startswith("<Material1>")
    assert problem_prompt(by_index["refinebench-000000"]) == by_index["refinebench-000000"].question


def test_bad_item_names_file_and_field(tmp_path, data_dir):
    folder = tmp_path / "refinebench"
    folder.mkdir()
    shutil.copy(data_dir / "refinebench" / SAMPLE_FILES[1], folder / SAMPLE_FILES[1])
    item = {"index": "refinebench-1", "field": "Math", "question": "q", "checklist": ["Does it?"],
            "exam_type": "Essay", "reference_answer": [], "materials": []}
    (folder / SAMPLE_FILES[0]).write_text(json.dumps({"Math": [item]}))
    with pytest.raises(InputError, match=r"refinebench_samples_109.json field 'Math\[0\].exam_type'"):
        load_refinebench(tmp_path)
    item.update(exam_type="Free Form", checklist=[])
    (folder / SAMPLE_FILES[0]).write_text(json.dumps({"Math": [item]}))
    with pytest.raises(InputError, match=r"field 'Math\[0\].checklist': expected a non-empty list"):
        load_refinebench(tmp_path)
    with pytest.raises(InputError, match="not found"):
        load_refinebench(tmp_path / "nowhere")
