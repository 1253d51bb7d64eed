"""Repetition penalty: clean prose ~0, pasted paragraphs and loops penalised, zh handled."""
import pytest

from jaxwrite.rl import (RepetitionConfig, dominant_script, near_duplicate_ratio, ngram_repeat_ratio,
                         repetition_penalty, repetition_report)

CLEAN_EN = (
    "The harbour town woke slowly under a grey sky. Fishermen dragged their boats across the shingle "
    "while gulls argued over scraps.\n\n"
    "Maria had not slept. She walked to the lighthouse with her father's letter folded in her coat, "
    "rehearsing what she would tell the keeper.\n\n"
    "By noon the fog lifted, revealing a ship none of them recognised, its sails patched with "
    "canvas of every colour imaginable.\n\n"
    "Nobody in the market could say where it came from, though old Tomas claimed he had seen its "
    "flag once, decades ago, off the northern cape."
)
PARAGRAPH = ("The committee reviewed the proposal in detail and concluded that the budget was "
             "insufficient for the planned expansion of the northern facility.")
CLEAN_ZH = (
    "清晨的小镇笼罩在薄雾之中，河边的柳树轻轻摇曳。\n"
    "老张推着自行车穿过石板路，车筐里装着刚从集市买来的青菜和豆腐。\n"
    "远处传来学校的钟声，孩子们背着书包三三两两地走进校门。\n"
    "街角的茶馆已经坐满了人，大家一边喝茶一边谈论着昨夜的那场大雨。"
)


def test_clean_text_has_near_zero_penalty():
    assert repetition_penalty(CLEAN_EN) < 0.05
    assert repetition_penalty(CLEAN_ZH) < 0.05


def test_paragraph_pasted_three_times_is_penalised():
    text = "\n\n".join([PARAGRAPH] * 3)
    report = repetition_report(text)
    assert report.lang == "en"
    assert report.duplicate_paragraph_ratio == pytest.approx(2 / 3)
    assert report.penalty > 0.6


def test_repeated_paragraph_inside_clean_text():
    text = CLEAN_EN + "\n\n" + PARAGRAPH + "\n\n" + PARAGRAPH + "\n\n" + PARAGRAPH
    assert repetition_penalty(text) > 0.2 > repetition_penalty(CLEAN_EN + "\n\n" + PARAGRAPH)


def test_chinese_loop_is_penalised_with_character_ngrams():
    para = "清晨的小镇笼罩在薄雾之中，河边的柳树轻轻摇曳，老张推着自行车穿过石板路。"
    report = repetition_report("\n".join([para] * 4))
    assert report.lang == "zh"
    assert report.ngram_repeat_ratio > 0.6
    assert report.penalty > 0.7


def test_near_duplicate_sentences_with_one_word_changed():
    sentences = ["The old captain walked slowly along the crowded pier at dawn today.",
                 "The old captain walked slowly along the crowded pier at dusk today."]
    report = repetition_report(" ".join(sentences))
    assert report.duplicate_sentence_ratio == pytest.approx(0.5)
    strict = RepetitionConfig(near_duplicate_jaccard=0.95)
    assert repetition_report(" ".join(sentences), config=strict).duplicate_sentence_ratio == 0.0


def test_components():
    assert ngram_repeat_ratio(list("abcabc"), 3) == pytest.approx(1 / 4)
    assert ngram_repeat_ratio(["a", "b"], 4) == 0.0
    units = [["a", "b", "c"], ["x", "y"], ["a", "b", "c"]]
    assert near_duplicate_ratio(units, shingle=2, threshold=0.8) == pytest.approx(3 / 8)
    assert near_duplicate_ratio([["a"]], shingle=2, threshold=0.8) == 0.0


def test_script_detection_and_override():
    assert dominant_script(CLEAN_ZH) == "zh"
    assert dominant_script(CLEAN_EN) == "en"
    assert repetition_report(CLEAN_EN, lang="zh").lang == "zh"
    with pytest.raises(ValueError, match="lang"):
        repetition_report(CLEAN_EN, lang="fr")


def test_empty_text():
    assert repetition_penalty("") == 0.0
