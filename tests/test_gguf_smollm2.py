"""A real instruct model, offline: SmolLM2-135M-Instruct as a Q4_1 GGUF (the `smollm2_gguf` fixture) read by
jaxwrite and by transformers' own GGUF loading, side by side.

Logits agree to 1e-3 in fp32 with the same argmax at every position of a chat prompt; the tokenizer and
chat template rebuilt from the GGUF metadata match transformers'; greedy decoding through `jaxwrite
generate` (the model's own chat template) writes transformers' 48 tokens on several writing prompts;
`jaxwrite serve` answers a schema-constrained judge request with JSON that parses; `convert --to hf`
writes a directory transformers loads with the same logits and tokenizer. Loads are shared per module.
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402

from jaxwrite.cli import main as cli_main  # noqa: E402
from jaxwrite.infer import load_for_inference  # noqa: E402

CHAT = [{"role": "system", "content": "You are a careful writing assistant."},
        {"role": "user", "content": "Write the opening paragraph of a short story about a lighthouse keeper "
                                    "who finds a letter in a bottle."}]
WRITING_PROMPTS = ["Write a four-line poem about autumn rain.",
                   "Describe a busy morning market in three sentences.",
                   "Write a short, friendly email inviting a colleague to lunch on Friday."]
NEW_TOKENS = 48


@pytest.fixture(scope="module")
def ours(smollm2_gguf):
    return load_for_inference(smollm2_gguf)


@pytest.fixture(scope="module")
def reference(smollm2_gguf):
    folder, name = os.path.split(smollm2_gguf)
    tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    return model, tok


def _logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def test_config_and_logits_match_transformers(ours, reference):
    model, tokenizer = ours
    ref_model, ref_tok = reference
    cfg = model.cfg
    assert (cfg.model_type, cfg.num_heads, cfg.num_kv_heads, cfg.vocab_size, cfg.rope_theta, cfg.tie_embeddings) == \
        ("llama", 9, 3, 49152, 100_000.0, True)
    ids = tokenizer.encode_chat(CHAT)
    assert ids == ref_tok.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True, return_dict=False)
    ours_logits = np.asarray(model(jnp.asarray([ids], jnp.int32)).logits)[0]           # [seq, vocab]
    ref_logits = _logits(ref_model, ids)
    assert np.abs(ours_logits - ref_logits).max() <= 1e-3
    np.testing.assert_array_equal(ours_logits.argmax(-1), ref_logits.argmax(-1))


def test_tokenizer_and_chat_template_match_transformers(ours, reference):
    _, tokenizer = ours
    _, ref_tok = reference
    texts = ["A lighthouse keeper's 3rd letter, dated 1897-04-12: \"Come home.\"",
             "  two leading spaces\n\n\tand a tab; CRLF\r\nend", "Émile's café — naïve résumé; 東京 🙂",
             "<|im_start|>user\nspecial tokens stay whole<|im_end|>"]
    for text in texts:
        ids = tokenizer.encode(text)
        assert ids == ref_tok(text, add_special_tokens=False)["input_ids"], text
        assert tokenizer.decode(ids) == ref_tok.decode(ids, skip_special_tokens=True)
    conversations = [CHAT, CHAT[1:], CHAT + [{"role": "assistant", "content": "The bottle was cold."},
                                             {"role": "user", "content": "Continue."}]]
    for messages in conversations:
        for generation_prompt in (True, False):
            assert tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt) == \
                ref_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    assert tokenizer.eos_ids == (ref_tok.eos_token_id,) and tokenizer.pad_id == ref_tok.pad_token_id


def test_greedy_generation_matches_transformers(smollm2_gguf, reference, tmp_path):
    ref_model, ref_tok = reference
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "query": q}) + "\n" for i, q in enumerate(WRITING_PROMPTS)))
    out = tmp_path / "out.jsonl"
    # One subprocess for every prompt: the command as a user runs it.
    proc = subprocess.run([sys.executable, "-m", "jaxwrite", "generate", "--model", smollm2_gguf, "--input",
                           str(prompts), "--output", str(out), "--temperature", "0", "--max-new-tokens",
                           str(NEW_TOKENS)], capture_output=True, text=True, env=dict(os.environ, XLA_FLAGS=""))
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    for i, query in enumerate(WRITING_PROMPTS):
        ids = ref_tok.apply_chat_template([{"role": "user", "content": query}], tokenize=True,
                                          add_generation_prompt=True, return_dict=False)
        with torch.no_grad():
            full = ref_model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                      eos_token_id=ref_tok.eos_token_id, pad_token_id=ref_tok.pad_token_id)
        new = full[0, len(ids):].tolist()
        assert written[i]["prompt_tokens"] == len(ids)
        assert written[i]["response"] == ref_tok.decode(new, skip_special_tokens=True), query


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_a_constrained_json_judge_request(smollm2_gguf, tmp_path):
    port = _free_port()
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jaxwrite", "serve", "--model", smollm2_gguf, "--port", str(port),
                             "--model-name", "smollm2"], stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, XLA_FLAGS=""))
    url = f"http://127.0.0.1:{port}/v1"
    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                                               "reason": {"type": "string", "maxLength": 80}},
              "required": ["score", "reason"], "additionalProperties": False}
    body = {"model": "smollm2", "temperature": 0, "max_tokens": 60,
            "messages": [{"role": "user", "content": "Rate this opening line from 1 to 10 and say why in one "
                                                     "sentence: 'The sea kept its letters.' Answer in JSON."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}}}
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=5).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.5)
        request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=240) as resp:
            reply = json.loads(resp.read())
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    verdict = json.loads(reply["choices"][0]["message"]["content"])
    assert set(verdict) == {"score", "reason"} and 1 <= verdict["score"] <= 10 and isinstance(verdict["reason"], str)


def test_convert_to_hf_loads_in_transformers(smollm2_gguf, ours, reference, tmp_path, capsys):
    _, tokenizer = ours
    ref_model, _ = reference
    out = tmp_path / "hf"
    assert cli_main(["convert", smollm2_gguf, str(out), "--to", "hf"]) == 0
    exported = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    exported_tok = transformers.AutoTokenizer.from_pretrained(out)
    ids = tokenizer.encode_chat(CHAT)
    assert exported_tok.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True, return_dict=False) == ids
    np.testing.assert_allclose(_logits(exported, ids), _logits(ref_model, ids), atol=1e-4, rtol=0)
