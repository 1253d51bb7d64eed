"""`jaxwrite generate`: HF-dir loading, incremental output, resume without duplicates, per-line errors,
group samples, the think/answer template; `load_for_inference` for both model formats."""
import json

import jax
import pytest

from jaxwrite.checkpoint import save_model_dir
from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError
from jaxwrite.infer import Engine, GenerationRequest, SamplingParams, load_for_inference, steps
from jaxwrite.models import save_hf
from jaxwrite.parallel import make_mesh
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


def test_a_loaded_checkpoint_compiles_each_prefill_shape_once(hf_dir):
    """On one device (a CPU, one GPU) the loaders put parameters on a one-device mesh, so a jitted step's
    outputs carry that sharding; the cache a prefill makes goes there too, or the chunks after the first
    would be a new cache key and every prefill shape would be traced and compiled twice (~5 s each for a
    135M model on 2 cores). The suite simulates 8 devices, so the one-device mesh is asked for here."""
    loaded, tok = load_for_inference(hf_dir, mesh=make_mesh(devices=jax.devices()[:1]))
    # A chunk size no other test uses, so the jit cache's growth counts this test's compilations only.
    eng = Engine(loaded, tok, max_batch=2, prefill_chunk=24, cache_sized_prefill=False, max_context=160)
    before = steps.prefill_chunk._cache_size()
    prompt = list(range(3, 73))                                   # 70 tokens: three chunks of 24
    (first,), = eng.generate([GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=3))])
    assert steps.prefill_chunk._cache_size() - before == 1
    again = engine().generate([GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=3))])
    assert first.token_ids == again[0][0].token_ids                # the same model, unplaced: the same text
