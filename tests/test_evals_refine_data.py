"""RefineBench loader: the two real sample files, de-duplication, materials, validation errors."""
import json
import shutil

import pytest

from jaxwrite.common import InputError
from jaxwrite.evals.refinebench_data import SAMPLE_FILES, load_refinebench, problem_prompt

CONFLICTS = ["refinebench-000579", "refinebench-000581", "refinebench-000586", "refinebench-000601"]


def test_real_samples_dedupe_and_conflicts(full_data_dir):
    # Full data only: the 109-item file (959 kB, CC BY-NC-ND: shipped whole or not at all) does not fit the
    # 2 MB sample beside the 46-item one; test_the_109_file_wins_and_conflicts_are_reported runs on both.
    data_dir = full_data_dir
    data = load_refinebench(data_dir)
    assert len(data.problems) == 138
    assert data.conflicts == CONFLICTS
    by_index = {p.index: p for p in data.problems}
    assert all(by_index[i].source == SAMPLE_FILES[0] for i in CONFLICTS)
    assert sum(p.source == SAMPLE_FILES[0] for p in data.problems) == 109
    assert {p.exam_type for p in data.problems} == {"Exact Match", "Free Form"}
    assert all(2 <= len(p.checklist) <= 20 for p in data.problems)
    p = by_index["refinebench-000839"]  # materials stored as Python-literal dicts with 'content'
    assert len(p.context) == 2 and p.context[0].startswith("[Passage B] Data:")
    prompt = problem_prompt(p)
    assert prompt.index("[Passage B]") < prompt.index("[Passage C]") < prompt.index(p.question)
    assert "{'content'" not in prompt
    assert problem_prompt(by_index["refinebench-000000"]) == by_index["refinebench-000000"].question


def test_materials_read_from_content_and_placed_before_question(data_dir):
    # Items of the 46-item file, which the full data root and the embedded sample both hold whole.
    by_index = {p.index: p for p in load_refinebench(data_dir).problems}
    q = by_index["refinebench-000862"]  # passages list + materials as one plain string
    assert len(q.context) == 5 and q.context[0].startswith("<Passage1>") and q.context[-1].startswith("<Material1>")
    prompt = problem_prompt(q)
    assert prompt.index("<Passage1>") < prompt.index("<Passage4>") < prompt.index("<Material1>") < \
        prompt.index(q.question)
    assert problem_prompt(by_index["refinebench-000010"]) == by_index["refinebench-000010"].question


def test_the_109_file_wins_and_conflicts_are_reported(data_dir, tmp_path):
    """The real 46-item file beside a 109-item file written here: one of its items copied unchanged (a
    duplicate), one index reused by another item (a conflict), one new item with its materials stored as
    Python-literal dicts, as the real 109-item file stores them."""
    folder = tmp_path / "refinebench"
    folder.mkdir()
    shutil.copy(data_dir / "refinebench" / SAMPLE_FILES[1], folder / SAMPLE_FILES[1])
    real = json.loads((folder / SAMPLE_FILES[1]).read_text(encoding="utf-8"))
    same, other = real["Math"][0], real["Math"][1]
    changed = {**other, "question": "Another question under the same index.", "materials": []}
    literal = {"index": "refinebench-999999", "field": "Math", "question": "Which passage is longer?",
               "checklist": ["Does it name a passage?"], "exam_type": "Free Form", "reference_answer": ["B"],
               "materials": [str({"content": "[Passage B] Data: two"}), str({"content": "[Passage C] three"})]}
    (folder / SAMPLE_FILES[0]).write_text(json.dumps({"Math": [same, changed, literal]}), encoding="utf-8")
    data = load_refinebench(tmp_path)
    by_index = {p.index: p for p in data.problems}
    assert len(data.problems) == 46 + 1 and data.conflicts == [other["index"]]
    assert by_index[other["index"]].question == changed["question"]   # the 109-item file's version is kept
    assert by_index[same["index"]].source == SAMPLE_FILES[0] and by_index[same["index"]].question == same["question"]
    p = by_index["refinebench-999999"]
    assert p.context == ("[Passage B] Data: two", "[Passage C] three")
    prompt = problem_prompt(p)
    assert prompt.index("[Passage B]") < prompt.index("[Passage C]") < prompt.index(p.question)
    assert "{'content'" not in prompt


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
