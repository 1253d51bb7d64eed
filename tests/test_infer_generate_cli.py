"""`jaxwrite generate`: HF-dir loading, incremental output, resume without duplicates, per-line errors,
group samples, the think/answer template; `load_for_inference` for both model formats."""
import json

import pytest

from jaxwrite.checkpoint import save_model_dir
from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError
from jaxwrite.infer import GenerationRequest, SamplingParams, load_for_inference
from jaxwrite.models import save_hf
from test_infer_support import engine, model, tokenizer, tokenizer_dir


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model(), str(path), tokenizer_dir=tokenizer_dir())
    return path


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_generate_writes_incrementally_and_resumes(hf_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    rows = [{"index": 1, "query": "a story"}, {"index": 2, "query": ""}, {"index": 3, "query": "the judge"},
            {"index": 4, "messages": [{"role": "user", "content": "river"}]}]
    prompts.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out),
            "--temperature", "0", "--max-new-tokens", "6"]
    assert cli_main(args) == 1                       # one bad line; the rest were written
    first = _lines(out)
    assert sorted(r["index"] for r in first) == [1, 3, 4]
    errors = _lines(tmp_path / "out.jsonl.errors.jsonl")
    assert errors[0]["index"] == 2 and errors[0]["error"].startswith(f"{prompts}:2")
    expected = engine().generate([GenerationRequest(tokenizer().encode_chat([{"role": "user", "content": "a story"}]),
                                                    SamplingParams(temperature=0, max_new_tokens=6))])[0][0]
    assert next(r for r in first if r["index"] == 1)["response"] == expected.text
    # Fix the bad line and re-run: only it runs, nothing is duplicated.
    rows[1]["query"] = "night"
    prompts.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert cli_main(args) == 0
    second = _lines(out)
    assert sorted(r["index"] for r in second) == [1, 2, 3, 4] and second[:3] == first


def test_generate_samples_preset_and_think_answer(hf_dir, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "prompt": "essay"}) + "\n")
    out = tmp_path / "o.jsonl"
    assert cli_main(["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out),
                     "--preset", "writingbench", "--max-new-tokens", "5", "--num-samples", "3",
                     "--think-answer", "en"]) == 0
    (rec,) = _lines(out)
    assert rec["id"] == "a" and len(rec["responses"]) == 3 and len(rec["answers"]) == 3
    # A random model may sample EOS within 5 tokens; it cannot write a well-formed think/answer pair.
    assert set(rec["finish_reasons"]) <= {"length", "stop"} and rec["well_formed"] == [False] * 3


def test_bad_sampling_flag_is_reported_per_line(hf_dir, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": 1, "prompt": "x"}) + "\n")
    out = tmp_path / "o.jsonl"
    assert cli_main(["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out),
                     "--top-p", "0"]) == 1
    assert "top_p" in _lines(tmp_path / "o.jsonl.errors.jsonl")[0]["error"]


def test_load_for_inference_both_formats(hf_dir, tmp_path):
    loaded, tok = load_for_inference(hf_dir)
    assert loaded.cfg.vocab_size == model().cfg.vocab_size and tok.vocab_size == tokenizer().vocab_size
    ckpt = save_model_dir(tmp_path / "ckpt", model(), model().cfg, tokenizer_dir=tokenizer_dir())
    loaded, tok = load_for_inference(ckpt)
    assert loaded.cfg == model().cfg and tok.eos_ids == tokenizer().eos_ids
    with pytest.raises(InputError):
        load_for_inference(tmp_path / "missing")
