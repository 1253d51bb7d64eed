"""RL prompt files: explicit ranges, ranges from length requests, defaults, file:line errors."""
import json
import logging

import pytest

from jaxwrite.common import InputError
from jaxwrite.rl import load_rl_prompts


def _write(tmp_path, records):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_ranges_from_file_request_and_default(tmp_path):
    path = _write(tmp_path, [
        {"id": "a", "prompt": "Write a story.", "lower": 100, "upper": 200},
        {"id": 2, "prompt": "Write a 3,000-word essay on rivers."},
        {"id": "c", "prompt": "写一篇不少于800字的散文。"},
        {"id": "d", "prompt": "Write a poem."},
    ])
    loaded = load_rl_prompts(path, max_len=10000, default_range=(300, 500))
    by_id = {p.id: p for p in loaded.prompts}
    assert (by_id["a"].lower, by_id["a"].upper) == (100, 200)
    assert (by_id["2"].lower, by_id["2"].upper) == (2700, 3300)
    assert by_id["c"].lower == 800 and by_id["c"].upper > 800
    assert (by_id["d"].lower, by_id["d"].upper) == (300, 500)
    assert all(p.max_len == 10000 for p in loaded.prompts)
    assert (loaded.num_explicit, loaded.num_from_request, loaded.num_default) == (1, 2, 1)


def test_prompts_without_range_fail_with_count_and_first_line(tmp_path):
    path = _write(tmp_path, [
        {"id": "a", "prompt": "Write about 500 words."},
        {"id": "b", "prompt": "Write a poem."},
        {"id": "c", "prompt": "Write a letter."},
    ])
    with pytest.raises(InputError, match=r"prompts.jsonl:2 field 'lower': 2 prompt\(s\) have no"):
        load_rl_prompts(path, max_len=1000)


@pytest.mark.parametrize("record, where", [
    ({"id": "a", "prompt": "x", "lower": 300, "upper": 200}, ":1 field 'upper'"),
    ({"id": "a", "prompt": "x", "lower": 0, "upper": 200}, ":1 field 'lower'"),
    ({"id": "a", "prompt": "x", "lower": 10.5, "upper": 200}, ":1 field 'lower'"),
    ({"id": "a", "prompt": "x", "lower": 100}, ":1 field 'upper'"),
    ({"id": "a", "prompt": ""}, ":1 field 'prompt'"),
    ({"id": None, "prompt": "x"}, ":1 field 'id'"),
    ({"prompt": "x"}, ":1 field 'id'"),
])
def test_bad_records_name_file_line_field(tmp_path, record, where):
    path = _write(tmp_path, [record])
    with pytest.raises(InputError, match="prompts.jsonl" + where):
        load_rl_prompts(path, max_len=1000, default_range=(1, 2))


def test_duplicate_ids_and_unreachable_targets(tmp_path, caplog):
    path = _write(tmp_path, [{"id": "a", "prompt": "x", "lower": 1, "upper": 2}] * 2)
    with pytest.raises(InputError, match=r":2 field 'id': duplicate id 'a' \(first on line 1\)"):
        load_rl_prompts(path, max_len=1000)
    path = _write(tmp_path, [{"id": "a", "prompt": "Write about 5,000 words."}])
    with caplog.at_level(logging.WARNING, logger="jaxwrite.rl.prompts"):
        load_rl_prompts(path, max_len=1000)
    assert "want more than max_len=1000 words" in caplog.text


def test_per_part_request_is_not_a_whole_answer_range(tmp_path):
    path = _write(tmp_path, [{"id": "a", "prompt": "Write three poems, each 200 words."}])
    loaded = load_rl_prompts(path, max_len=1000, default_range=(500, 700))
    assert loaded.num_default == 1 and loaded.prompts[0].lower == 500
