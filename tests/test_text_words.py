"""count_words: LongBench-Write's official counter, case by case."""
import re

import pytest

from jaxwrite.text import count_words


@pytest.mark.parametrize("text, expected", [
    ("", 0),
    ("Hello world", 2),
    ("don't", 2),                         # the apostrophe splits it
    ("It is 2024, with 3 cats.", 4),      # digits are not words
    ("abc123 def", 1),                    # "abc123" has no \b after "abc"
    ("snake_case word", 1),               # "_" is a word character
    ("café au lait", 2),                  # é is a word character, so "caf" has no \b after it
    ("naïve résumé", 0),
    ("well-known e.g.", 4),
    ("中文写作", 4),
    ("中文，写作。「引号」！", 6),        # CJK punctuation is not counted
    ("Hello中文world", 2),                # English touching CJK has no \b
    ("Hello 中文 world", 4),
    ("  leading\n\ntrailing  ", 2),       # raw string, nothing stripped changes the count
    ("㐀 is outside", 2),                 # CJK extension A (U+3400) is not counted
    ("鿿一", 2),                          # both ends of the range count
])
def test_count_words(text, expected):
    assert count_words(text) == expected


def test_matches_reference_formula_on_mixed_text():
    text = "LongWriter 写出了 10,000 字的 essay — it's long.\n第二段：More text here。"
    reference = len(re.findall(r"[\u4e00-\u9fff]", text)) + len(re.findall(r"\b[a-zA-Z]+\b", text))
    assert count_words(text) == reference
