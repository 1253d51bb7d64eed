"""LongBench-Write length score, quality judge request and parsing, S_q."""
import pytest

from jaxwrite.common import InputError
from jaxwrite.evals import length_score, load_longbench_write, parse_quality_output, quality_request, quality_scores
from jaxwrite.evals.longbench_write import QUALITY_DIMENSIONS, length_scores_by_bin, read_longwrite_responses
from jaxwrite.prompts import official_prompt


@pytest.mark.parametrize("required, produced, expected", [
    (100, 100, 100.0),
    (100, 200, 100 * (1 - 1 / 3)),   # over: (y/x - 1) / 3
    (100, 400, 0.0),
    (100, 1000, 0.0),                # clipped at 0
    (100, 50, 50.0),                 # under: (x/y - 1) / 2
    (100, 80, 100 * (1 - 0.25 / 2)),
    (100, 25, 0.0),
    (100, 0, 0.0),                   # empty output scores 0, no division by zero
])
def test_length_score_official_formula(required, produced, expected):
    assert length_score(required, produced) == pytest.approx(expected)


def test_length_score_rejects_nonpositive_requirement():
    with pytest.raises(ValueError):
        length_score(0, 10)


def test_length_bins():
    bins = length_scores_by_bin([100, 600, 700, 5000], [10.0, 20.0, 40.0, 90.0])
    assert bins == {"[0,500)": 10.0, "[500,2000)": 30.0, "[2000,4000)": None, "[4000,)": 90.0}


def test_quality_request_fills_judge_template():
    req = quality_request("Write 300 words on tea.", "Tea is $INST$ green.", seed=3)
    [msg] = req.messages
    template = official_prompt("longbench_write_judge")
    head, tail = template.split("$INST$")
    assert msg["role"] == "user" and msg["content"].startswith(head + "Write 300 words on tea.")
    assert "<Response>\n\nTea is $INST$ green.\n\n</Response>" in msg["content"]
    assert (req.sampling.temperature, req.sampling.max_new_tokens, req.sampling.seed) == (0.5, 1024, 3)


GOOD = ('{"Analysis": "fine\nreally", "Relevance": 5, "Accuracy": 4, "Coherence": 3, "Clarity": 4, '
        '"Breadth and Depth": 2, "Reading Experience": 4.0}')


def test_parse_quality_output_plain_and_fenced():
    expected = {"Relevance": 5.0, "Accuracy": 4.0, "Coherence": 3.0, "Clarity": 4.0, "Breadth and Depth": 2.0,
                "Reading Experience": 4.0}
    assert parse_quality_output(GOOD) == expected
    assert parse_quality_output("Here you go:\n```json\n" + GOOD + "\n```\nThanks") == expected


@pytest.mark.parametrize("text", [
    GOOD.replace('"Clarity": 4, ', ""),          # a dimension missing
    GOOD.replace('"Clarity": 4', '"Clarity": 6'),
    GOOD.replace('"Clarity": 4', '"Clarity": "4"'),
    GOOD.replace('"Clarity": 4', '"Clarity": true'),
    "no json here", "[1, 2]",
])
def test_parse_quality_output_rejects(text):
    assert parse_quality_output(text) is None


def test_quality_scores_scale_and_mean():
    a = {d: 5.0 for d in QUALITY_DIMENSIONS}
    b = {d: 3.0 for d in QUALITY_DIMENSIONS} | {"Clarity": 1.0}
    q = quality_scores([a, b])
    assert q["Relevance"] == 75.0 and q["Clarity"] == 50.0      # (mean - 1) * 25
    assert q["S_q"] == pytest.approx((5 * 75 + 50) / 6)
    assert quality_scores([]) is None


def test_load_subsets_and_validate_responses(data_dir, tmp_path):
    items = load_longbench_write(data_dir)
    assert len(items) == 120 and items[0].index == 1 and items[0].length == 100
    assert len(load_longbench_write(data_dir, "longbench_write_en")) == 60
    ruler = load_longbench_write(data_dir, "longwrite_ruler")
    assert sorted({it.length for it in ruler}) == [1000, 2000, 5000, 10000, 20000, 30000]
    with pytest.raises(InputError, match="unknown LongBench-Write subset"):
        load_longbench_write(data_dir, "nope")
    path = tmp_path / "r.jsonl"
    path.write_text('{"index": 1, "response": "a"}\n{"index": 0, "response": "b"}\n')
    with pytest.raises(InputError, match=r"r.jsonl:2 field 'index': expected a 1-based benchmark line number"):
        read_longwrite_responses(path, 120)
    path.write_text('{"index": 2, "response": "a"}\n{"index": 2, "response": "b"}\n')
    with pytest.raises(InputError, match="r.jsonl:2 field 'index': expected each index once"):
        read_longwrite_responses(path, 120)
