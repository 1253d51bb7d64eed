"""Length requests in prompts and the target ranges derived from them."""
import json

import pytest

from jaxwrite.text import LengthRequest, length_range_for, parse_length_request


@pytest.mark.parametrize("prompt, kind, low, high", [
    ("Write an essay of about 3,000 words on tides.", "about", 3000, 3000),
    ("Write a 3000-word essay.", "about", 3000, 3000),
    ("Answer in at least 500 words.", "at_least", 500, 500),
    ("Keep it to no more than 800 words.", "at_most", 800, 800),
    ("The story should be between 1,500 and 2,000 words.", "between", 1500, 2000),
    ("Write 1500-2000 words on rivers.", "between", 1500, 2000),
    ("A 2k word review.", "about", 2000, 2000),
    ("Write 600 words or more.", "at_least", 600, 600),
    ("Word count: 1200.", "about", 1200, 1200),
    ("写一篇800字的散文", "about", 800, 800),
    ("不少于3000字", "at_least", 3000, 3000),
    ("写一篇文章，3000字左右。", "about", 3000, 3000),
    ("篇幅2000到3000字", "between", 2000, 3000),
    ("写一篇五千字的小说", "about", 5000, 5000),
    ("三千字的开题报告", "about", 3000, 3000),
    ("200字以内", "at_most", 200, 200),
    ("1800字以上", "at_least", 1800, 1800),
    ("字数要求：2000左右", "about", 2000, 2000),
    ("1.5万字的报告", "about", 15000, 15000),
    ("写一万五千字", "about", 15000, 15000),
])
def test_parse(prompt, kind, low, high):
    request = parse_length_request(prompt)
    assert request is not None
    assert (request.kind, request.low, request.high) == (kind, low, high)
    assert not request.per_part


@pytest.mark.parametrize("prompt", [
    "Write a story about a cross.", "十字路口的故事", "背诵千字文", "列出10个例子", "The 2024 election in 5 bullet points.",
    "写一篇关于八字的文章",
])
def test_no_request(prompt):
    assert parse_length_request(prompt) is None


def test_keyword_and_whole_text_requests_win():
    request = parse_length_request("写五篇日记，每篇400字左右，总字数不少于2000字。")
    assert (request.kind, request.low) == ("at_least", 2000)
    per_part = parse_length_request("创作五篇日记，每篇400字左右。")
    assert per_part.per_part and per_part.low == 400
    assert parse_length_request("Write 3 poems, each about 100 words.").per_part


def test_units():
    assert parse_length_request("写一篇300词的英语作文").unit == "words"
    assert parse_length_request("写300字").unit == "characters"
    assert parse_length_request("300 words").unit == "words"


def test_ranges():
    about = LengthRequest("about", 3000, 3000, "words", "about 3,000 words")
    assert length_range_for(about) == (2700, 3300)           # the LongWriter-Zero paper's example
    assert length_range_for(about, tolerance=0.2) == (2400, 3600)
    assert length_range_for(LengthRequest("at_least", 500, 500, "words", "")) == (500, 650)
    assert length_range_for(LengthRequest("at_most", 800, 800, "words", "")) == (560, 800)
    assert length_range_for(LengthRequest("between", 1500, 2000, "words", "")) == (1500, 2000)
    with pytest.raises(ValueError):
        length_range_for(about, tolerance=1.5)
    for prompt in ("about 7 words", "at most 1 word", "写100到100字"):
        lower, upper = length_range_for(parse_length_request(prompt))
        assert 0 <= lower <= upper


def test_longbench_write_prompts(data_dir):
    """Requests found in the 120 LongBench-Write prompts agree with their `length` field."""
    path = data_dir / "longbench_write" / "longbench_write.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 120
    matched = 0
    for record in records:
        request = parse_length_request(record["prompt"])
        if request is None:
            continue
        if record["length"] in (request.low, request.high):
            matched += 1
        else:
            assert request.per_part, (record["prompt"][:80], request)  # only per-part lengths may differ
    assert matched >= 114
