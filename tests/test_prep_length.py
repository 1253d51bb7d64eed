"""Long-form prompt labels: validation, explicit-request consistency, RL prompt file the GRPO loader reads."""
import dataclasses
import json

import pytest

from jaxwrite.chat import ChatResult
from jaxwrite.prep import (LONG_FORM_LABELLING, LengthBounds, explicit_range, label_long_form, load_queries,
                           resolve_range, validate_length_label)
from jaxwrite.rl import load_rl_prompts

NO_BAR = dataclasses.replace(LONG_FORM_LABELLING, progress=False)


@pytest.mark.parametrize("value, reason", [
    ([1, 2], "not_an_object"),
    ({"long_form": "yes", "lower": 1, "upper": 2}, "bad_long_form"),
    ({"long_form": True, "lower": 500}, "bad_range_type"),
    ({"long_form": True, "lower": 500.0, "upper": 800}, "bad_range_type"),
    ({"long_form": True, "lower": True, "upper": 800}, "bad_range_type"),
    ({"long_form": True, "lower": 900, "upper": 800}, "lower_above_upper"),
    ({"long_form": True, "lower": 50, "upper": 80}, "out_of_bounds"),
    ({"long_form": True, "lower": 30_000, "upper": 40_000}, "out_of_bounds"),
    ({"long_form": True, "lower": 200, "upper": 1000}, "range_too_wide"),
])
def test_invalid_labels(value, reason):
    assert validate_length_label(value, LengthBounds(100, 32_000, 4.0)) == (None, reason)


def test_valid_labels():
    assert validate_length_label({"long_form": False, "lower": 0, "upper": 0}) == (
        {"long_form": False, "lower": None, "upper": None}, None)
    assert validate_length_label({"long_form": True, "lower": 800, "upper": 1200})[0]["upper"] == 1200


def test_explicit_request_wins_or_flags():
    prompt = "Write a 3,000-word essay on rivers."
    assert explicit_range(prompt) == (2700, 3300)
    assert explicit_range("Write three poems, each 200 words long.") is None  # per-part: no total
    agree = {"long_form": True, "lower": 2800, "upper": 3500}
    clash = {"long_form": True, "lower": 500, "upper": 900}
    rec = resolve_range(prompt, agree)
    assert (rec["lower"], rec["upper"], rec["range_source"], rec["conflict"]) == (2700, 3300, "explicit_request", False)
    rec = resolve_range(prompt, clash)
    assert (rec["lower"], rec["upper"], rec["conflict"], rec["predicted"]) == (2700, 3300, True, [500, 900])
    rec = resolve_range(prompt, clash, on_conflict="flag")
    assert (rec["lower"], rec["upper"], rec["range_source"], rec["conflict"]) == (500, 900, "model", True)
    rec = resolve_range("Write a story about a lighthouse.", clash)
    assert (rec["lower"], rec["upper"], rec["range_source"], rec["explicit"]) == (500, 900, "model", None)


class Labeller:
    label = "fake:labeller"

    def __init__(self, answers):
        self.answers = answers  # prompt marker -> list of texts
        self.calls = 0

    def chat(self, requests):
        self.calls += len(requests)
        out = []
        for req in requests:
            key = next(k for k in self.answers if k in req.messages[1]["content"])
            texts = self.answers[key]
            out.append(ChatResult(text=texts.pop(0) if len(texts) > 1 else texts[0]))
        return out


def test_label_long_form_writes_the_rl_prompt_file(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": "p1", "prompt": "P1 Write a 3,000-word essay on rivers."},
            {"id": "p2", "prompt": "P2 What is 2 + 2?"},
            {"id": "p3", "prompt": "P3 Write a short story about a lighthouse."},
            {"id": "p4", "prompt": ""},
            {"id": "p5", "prompt": "P5 Write a novel chapter."}]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labeller = Labeller({
        "P1": ['{"long_form": true, "lower": 500, "upper": 900}'],
        "P2": ['{"long_form": false, "lower": 0, "upper": 0}'],
        "P3": ["sure!", '```json\n{"long_form": true, "lower": 900, "upper": 800}\n```',
               '{"long_form": true, "lower": 1200, "upper": 1800}'],
        "P5": ['{"long_form": 1}']})
    labels, rl = tmp_path / "labels.jsonl", tmp_path / "rl.jsonl"
    summary = label_long_form(load_queries(prompts, "prompt"), labeller, labels, rl, NO_BAR)
    assert summary["empty_prompt"] == 1 and summary["failed"] == 1
    assert summary["rejects"] == {"invalid_json": 1, "lower_above_upper": 1, "bad_long_form": 3}
    assert (summary["long_form"], summary["not_long_form"], summary["conflicts"]) == (2, 1, 1)
    assert summary["rl_prompts_written"] == 2
    loaded = load_rl_prompts(rl, max_len=10_000)
    assert {p.id: (p.lower, p.upper) for p in loaded.prompts} == {"p1": (2700, 3300), "p3": (1200, 1800)}
    assert loaded.num_explicit == 2
    # resume: nothing done is asked again; the RL file is rebuilt the same
    calls = labeller.calls
    labeller.answers["P5"] = ['{"long_form": true, "lower": 2000, "upper": 4000}']
    summary = label_long_form(load_queries(prompts, "prompt"), labeller, labels, rl, NO_BAR)
    assert labeller.calls - calls == 1 and summary["resumed"] == 3 and summary["rl_prompts_written"] == 3


def test_label_long_form_with_no_valid_label_counts_the_failures(tmp_path):
    # Every answer invalid: no labels file is ever created, the RL file is empty, the summary counts it.
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "prompt": "P1 Write a story."}) + "\n")
    labeller = Labeller({"P1": ["not json"]})
    summary = label_long_form(load_queries(prompts, "prompt"), labeller, tmp_path / "labels.jsonl",
                              tmp_path / "rl.jsonl", dataclasses.replace(NO_BAR, attempts=1))
    assert summary["failed"] == 1 and summary["rl_prompts_written"] == 0
    assert (tmp_path / "rl.jsonl").read_text() == ""
