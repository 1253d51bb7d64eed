"""Constrained JSON decoding (always parses), the schema DFA, score-logit mode and the local judge."""
import json

import jax
import numpy as np
import pytest
from flax import nnx

from jaxwrite.chat import ChatRequest
from jaxwrite.evals import LocalJudge
from jaxwrite.infer import SCORE_LOGIT_MODE, GenerationRequest, SamplingParams, ScoreReader, compile_schema
from test_infer_support import engine, model, tokenizer

VERDICT = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                                            "reason": {"type": "string"}}, "required": ["score", "reason"]}
MIXED = {"type": "object", "properties": {
    "name": {"type": "string"}, "ok": {"type": "boolean"}, "kind": {"enum": ["essay", "story", 3]},
    "x": {"type": "number"}, "n": {"type": "integer"},
    "inner": {"type": "object", "properties": {"flag": {"type": "null"}}}}}


@pytest.fixture(scope="module")
def eng():
    return engine()


def test_schema_dfa_accepts_canonical_json_only():
    dfa = compile_schema(VERDICT)
    ok = ['{"score": 1, "reason": ""}', '{"score": 10, "reason": "a \\"q\\" \\u00e9 中文"}']
    bad = ['{"score": 0, "reason": ""}', '{"score": 11, "reason": ""}', '{"score":1, "reason": ""}',
           '{"reason": "", "score": 1}', '{"score": 1, "reason": "x"} ', '{"score": 1, "reason": "\\q"}']
    for text in ok:
        assert dfa.accepts(text.encode()), text
    for text in bad:
        assert not dfa.accepts(text.encode()), text
    mixed = compile_schema(MIXED)
    text = '{"name": "x", "ok": false, "kind": 3, "x": -0.25, "n": 120, "inner": {"flag": null}}'
    assert mixed.accepts(text.encode())
    with pytest.raises(ValueError, match="keyword 'pattern' is not supported"):
        compile_schema({"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}})


def test_strings_accept_only_well_formed_utf8():
    """Inside strings the automaton spells whole UTF-8 characters: no overlongs, surrogates, code points
    past U+10FFFF, stray continuation bytes or unfinished characters."""
    dfa = compile_schema({"type": "object", "properties": {"r": {"type": "string"}}})
    wrap = lambda b: b'{"r": "' + b + b'"}'  # noqa: E731
    for text in ("é", "中文", "🙂", "\u0800", "\u07ff", "\ud7ff", "\ue000", "\uffff", "\U0010ffff"):
        assert dfa.accepts(wrap(text.encode())), text
    for raw in (b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"\xf5\x80\x80\x80", b"\x80", b"\xc3", b"\xe4\xb8"):
        assert not dfa.accepts(wrap(raw)), raw


def test_byte_level_tokens_complete_characters_in_constrained_output(tmp_path):
    """With a byte-level BPE tokenizer every token's exact bytes are allowed, partial characters
    included: sampled verdicts use them and still decode to valid JSON whose UTF-8 is those bytes."""
    from jaxwrite.infer import Engine
    from jaxwrite.models import Transformer, get_preset
    from jaxwrite.text import load_tokenizer
    from test_text_hf_tokenizer import _not_utf8, _write_qwen_like
    _write_qwen_like(tmp_path)
    tok = load_tokenizer(tmp_path)
    table = tok.token_bytes()
    eng = Engine(Transformer(get_preset("tiny", vocab_size=tok.vocab_size, max_seq_len=256), nnx.Rngs(1)),
                 tok, max_batch=8, chunk_steps=8)
    prompt = tok.encode("中文写作测试，给出分数")
    requests = [GenerationRequest(prompt, SamplingParams(temperature=3.0, max_new_tokens=40, seed=s),
                                  json_schema=VERDICT) for s in range(8)]
    partial = 0
    for (c,) in eng.generate(requests):
        raw = b"".join(table[i] for i in c.token_ids)
        assert raw.decode("utf-8") == c.text and set(json.loads(c.text)) == {"score", "reason"}
        partial += sum(1 for i in c.token_ids if _not_utf8(table[i]))
    assert partial > 0                           # partial-character tokens were drawn and completed


def test_min_length_one_requires_visible_text():
    dfa = compile_schema({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}},
                          "required": ["a"]})
    assert dfa.accepts(b'{"a": "x"}')
    assert dfa.accepts(b'{"a": "x \\n"}')
    for text in (b'{"a": ""}', b'{"a": " x"}', b'{"a": "\\nx"}'):
        assert not dfa.accepts(text), text
    three = compile_schema({"type": "string", "minLength": 3})     # longer minimums are counted exactly
    assert three.accepts('"x中 "'.encode()) and not three.accepts(b'"xy"') and not three.accepts(b'" xy"')


def test_constrained_verdicts_always_parse(eng):
    prompt = tokenizer().encode("the judge gives a score and a reason")
    # Tight budgets too: the automaton closes the JSON in time.
    requests = [GenerationRequest(prompt, SamplingParams(temperature=2.0, max_new_tokens=budget, seed=seed),
                                  json_schema=VERDICT)
                for seed in range(12) for budget in (14, 40)]
    for (completion,) in eng.generate(requests):
        verdict = json.loads(completion.text)
        assert set(verdict) == {"score", "reason"}
        assert isinstance(verdict["score"], int) and 1 <= verdict["score"] <= 10
        assert isinstance(verdict["reason"], str)
        assert completion.finish_reason == "stop"


def test_general_schema_and_free_rows_share_a_batch(eng):
    tok = tokenizer()
    requests = [GenerationRequest(tok.encode("plan"), SamplingParams(temperature=1.5, max_new_tokens=60, seed=s),
                                  json_schema=MIXED) for s in range(4)]
    requests.append(GenerationRequest(tok.encode("plan"), SamplingParams(temperature=0.0, max_new_tokens=5)))
    results = eng.generate(requests)
    for (c,) in results[:4]:
        value = json.loads(c.text)
        assert list(value) == list(MIXED["properties"])
        assert isinstance(value["name"], str) and isinstance(value["ok"], bool)
        assert value["kind"] in ("essay", "story", 3) and isinstance(value["x"], (int, float))
        assert isinstance(value["n"], int) and value["inner"] == {"flag": None}
    assert len(results[4][0].token_ids) == 5


def test_constrained_rows_keep_their_state_when_the_table_is_rebuilt(monkeypatch):
    """Admitting a request with a new schema after another schema's rows finished rebuilds the
    table: running rows' automaton states move to their schema's new offset and still parse."""
    from jaxwrite.infer import steps
    from test_infer_engine import ScriptedFeed
    remaps = []
    real = steps.remap_states
    monkeypatch.setattr(steps, "remap_states", lambda rows, m: remaps.append(1) or real(rows, m))
    eng = engine()
    tok = tokenizer()
    flag = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    short = GenerationRequest(tok.encode("plan"), SamplingParams(temperature=0.0, max_new_tokens=12),
                              json_schema=flag)
    running = GenerationRequest(tok.encode("the judge"), SamplingParams(temperature=1.5, max_new_tokens=60,
                                                                        seed=3), json_schema=VERDICT)
    late = GenerationRequest(tok.encode("plan"), SamplingParams(temperature=1.5, max_new_tokens=60, seed=4),
                             json_schema=MIXED)
    alone = [eng.generate([r])[0][0] for r in (short, running, late)]
    # `short` ends within 12 tokens (two 8-step chunks); `late` comes after the third chunk.
    done = list(eng.serve(ScriptedFeed([(0, short), (1, running)], [], [], [(2, late)])))
    assert remaps, "the running VERDICT row should have moved to a rebuilt table"
    got = {c.request_index: c for c in done}
    assert [got[i].text for i in range(3)] == [c.text for c in alone]
    assert set(json.loads(got[1].text)) == {"score", "reason"} and list(json.loads(got[2].text)) == list(MIXED["properties"])


def test_schema_errors_are_per_request(eng):
    tok = tokenizer()
    results = eng.generate([
        GenerationRequest(tok.encode("a"), SamplingParams(max_new_tokens=20),
                          json_schema={"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}),
        GenerationRequest(tok.encode("a"), SamplingParams(max_new_tokens=2), json_schema=VERDICT)])
    assert "keyword 'format' is not supported" in results[0][0].error
    assert "max_tokens" in results[1][0].error


def _manual_distribution(reader: ScoreReader, prompt: list[int]) -> np.ndarray:
    graphdef, state = nnx.split(model())
    forward = jax.jit(lambda state, tokens, mask: nnx.merge(graphdef, state)(tokens, attention_mask=mask).logits)

    def next_probs(ids):
        tokens = np.zeros((1, 128), np.int32)
        tokens[0, :len(ids)] = ids
        logits = np.asarray(forward(state, tokens, np.arange(128)[None] < len(ids))[0, len(ids) - 1], np.float64)
        e = np.exp(logits - logits.max())
        return e / e.sum()
    first = next_probs(prompt)
    mass = np.array([first[reader.score_of == k].sum() for k in range(1, 11)])
    if reader.one_ids:
        after = next_probs(prompt + [reader.one_ids[0]])
        p1 = first[reader.one_ids].sum()
        mass[9] += p1 * after[reader.zero].sum()
        mass[0] += p1 * after[~reader.digit].sum()
    return mass / mass.sum()


def test_score_logit_matches_manual_softmax(eng):
    reader = ScoreReader(eng)
    tok = tokenizer()
    assert [tok.decode([i]) for i in reader.one_ids] and all(tok.decode([i]) == "1" for i in reader.one_ids)
    prompts = [reader.prompt_ids([{"role": "user", "content": q}]) for q in ("rate the essay", "score 中文 story")]
    before = eng.stats.prefill_calls
    dists = reader.read(prompts)
    assert eng.stats.prefill_calls - before == 1            # one batched prefill, no decoding
    for prompt, dist in zip(prompts, dists):
        manual = _manual_distribution(reader, prompt)
        np.testing.assert_allclose(dist.probs, manual, atol=1e-5)
        assert 1 <= dist.expected <= 10
        assert dist.expected == pytest.approx(float(np.dot(manual, np.arange(1, 11))), abs=1e-4)
        assert dist.argmax == int(np.argmax(manual)) + 1 and dist.mode == SCORE_LOGIT_MODE


def test_local_judge_generate_and_score_logit(eng):
    messages = ({"role": "system", "content": "judge"}, {"role": "user", "content": "rate this story"})
    judge = LocalJudge(engine=eng, name="tiny")
    results = judge.chat([ChatRequest(messages, SamplingParams(temperature=1.0, max_new_tokens=40, seed=s), VERDICT)
                          for s in range(3)] + [ChatRequest(messages, SamplingParams(max_new_tokens=0))])
    for r in results[:3]:
        assert r.ok and 1 <= json.loads(r.text)["score"] <= 10
    assert not results[3].ok and "max_new_tokens" in results[3].error
    fast = LocalJudge(engine=eng, mode="score_logit", name="tiny")
    assert "non-official" in fast.label
    verdict = json.loads(fast.chat([ChatRequest(messages)])[0].text)
    assert verdict["mode"] == SCORE_LOGIT_MODE and 1 <= verdict["score"] <= 10
    assert 1 <= verdict["score_expected"] <= 10 and verdict["score_argmax"] == verdict["score"]
