"""Every request field of both endpoints is honoured or refused, never dropped, and no input gives a 5xx
(issue 29): a fuzz over every field the server knows (and unknown ones), top level and nested, with
hostile values (wrong types, out of range, NaN, huge integers, lone surrogates); and vLLM's extensions
give through HTTP exactly what the engine gives for them. One server for the module."""
import http.client
import json
import threading

import pytest

from jaxwrite.infer import GenerationRequest, SamplingParams
from jaxwrite.infer.openai_fields import HONOURED, NEUTRAL
from jaxwrite.infer.http_app import Limits
from jaxwrite.infer.server import InferenceServer, ServeSettings
from test_infer_support import engine, tokenizer

CHAT, TEXT = "/v1/chat/completions", "/v1/completions"
NAN = float("nan")
HOSTILE = [None, True, False, 0, -1, 1, 7, 2 ** 31, 2 ** 63, 10 ** 30, 10 ** 400, 1e308, -1e308, 0.5,
           NAN, float("inf"), "", "x", "\ud800", [], [1], ["x"], ["\ud800"], [[]], {}, {"a": 1},
           {"\ud800": 1}, "A" * 5000]
# A known unimplemented field takes one path (its neutral values or 400): fewer values cover it.
FEW = [None, True, False, 0, 1, NAN, "x", "\ud800", [], {}]
_local = threading.local()


@pytest.fixture(scope="module")
def server():
    srv = InferenceServer(engine(), ServeSettings(port=0, model_name="tiny", limits=Limits(max_tokens=16), quiet=True))
    srv.start_background()
    yield srv
    srv.close()


def _base(chat: bool) -> dict:
    prompt = {"messages": [{"role": "user", "content": "a story"}]} if chat else {"prompt": "a story"}
    return {"model": "tiny", **prompt, "max_tokens": 1, "temperature": 0}


def _post(port: int, path: str, body: dict) -> tuple[int, bytes]:
    """POSTs on one keep-alive connection (JSON as Python writes it: NaN, 1e400 and lone
    surrogates included, as a hostile client may send them)."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read()
    if resp.getheader("connection", "").lower() == "close":
        conn.close()
        _local.conn = None
    return resp.status, raw


def _problem(status: int, raw: bytes, what: str) -> str | None:
    """What is wrong with an answer: a 5xx, a 4xx without a JSON error, a 200 without choices."""
    if status >= 500:
        return f"{what}: HTTP {status} {raw[:200]!r}"
    if status >= 400:
        error = json.loads(raw).get("error", {})
        return None if error.get("message") and error.get("code") else f"{what}: {status} without an error body"
    if b"data: " in raw[:10]:
        return None if raw.rstrip().endswith(b"data: [DONE]") else f"{what}: stream not ended"
    return None if json.loads(raw).get("choices") else f"{what}: 200 without choices"


def _cases() -> list[tuple[str, str, dict]]:
    """(path, what, body): every known field of both endpoints (and a few unknown names) at every
    hostile value, and the nested fields of messages, content parts, response_format and stream_options."""
    cases = []
    for chat, path in ((True, CHAT), (False, TEXT)):
        names = sorted(HONOURED[True] | HONOURED[False] | set(NEUTRAL) | {"frobnicate", "\ud800", "Temperature"})
        for name in names:
            for i, value in enumerate(HOSTILE):
                if name not in NEUTRAL or value in FEW:
                    cases.append((path, f"{path} {name!a}={i}", {**_base(chat), name: value}))
        for i, value in enumerate(HOSTILE):
            if chat:
                for key in ("role", "content", "name", "tool_calls"):
                    cases.append((path, f"message.{key}={i}", {**_base(chat), "messages": [
                        {"role": "user", "content": "a", key: value}]}))
                for key in ("type", "text", "cache_control"):
                    part = {"type": "text", "text": "a", key: value}
                    cases.append((path, f"part.{key}={i}", {**_base(chat), "messages": [
                        {"role": "user", "content": [part]}]}))
            for fmt in ({"type": value}, {"type": "json_schema", "json_schema": value},
                        {"type": "json_schema", "json_schema": {"schema": value}},
                        {"type": "json_schema", "json_schema": {"schema": {"type": "object"}, "strict": True, "x": value}}):
                cases.append((path, f"response_format={fmt!a}", {**_base(chat), "response_format": fmt}))
            cases.append((path, f"stream_options={i}", {**_base(chat), "stream": True,
                                                        "stream_options": {"include_usage": value}}))
            cases.append((path, f"stream_options.other={i}", {**_base(chat), "stream": True,
                                                              "stream_options": {"include_usage": True, "x": value}}))
    return cases


def test_fuzz_every_field_of_both_endpoints_gets_200_or_a_json_4xx(server):
    # One client, one keep-alive connection: concurrency is test_serve_reliability's; here every answer counts.
    answers = [(what, *_post(server.port, path, body)) for path, what, body in _cases()]
    problems = [p for what, status, raw in answers if (p := _problem(status, raw, what))]
    assert not problems, problems[:10]
    by_what = {what: (status, raw) for what, status, raw in answers}
    # Unknown fields are refused by name, known unimplemented ones unless neutral, lone surrogates anywhere.
    for path in (CHAT, TEXT):
        for name in ("frobnicate", "Temperature"):
            status, raw = by_what[f"{path} {name!a}={HOSTILE.index('x')}"]
            assert status == 400 and json.loads(raw)["error"]["code"] == "unknown_field" and name in raw.decode()
        for name, neutral in NEUTRAL.items():
            for i, value in enumerate(HOSTILE):
                if f"{path} {name!a}={i}" not in by_what:
                    continue
                status, raw = by_what[f"{path} {name!a}={i}"]
                if not any(value is n or (value == n and type(value) is type(n)) for n in neutral):
                    assert status == 400, (name, value)
        status, raw = by_what[f"{path} 'model'={HOSTILE.index(chr(0xd800))}"]
        assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_unicode"
    status, raw = by_what[f"{TEXT} 'prompt'={HOSTILE.index(chr(0xd800))}"]
    assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_unicode"
    status, raw = by_what[f"{CHAT} 'messages'={HOSTILE.index([])}"]
    assert status == 400
    # The other endpoint's field is named as such.
    status, raw = by_what[f"{TEXT} 'messages'={HOSTILE.index('x')}"]
    assert status == 400 and "/v1/chat/completions" in json.loads(raw)["error"]["message"]
    assert _post(server.port, CHAT, _base(True))[0] == 200


def test_errors_name_the_field_the_request_used(server):
    for name in ("max_tokens", "max_completion_tokens"):
        body = {**_base(True), "max_tokens": None, name: 0}
        status, raw = _post(server.port, CHAT, body)
        message = json.loads(raw)["error"]["message"]
        assert status == 400 and f"field '{name}'" in message and "max_new_tokens" not in message
    status, raw = _post(server.port, CHAT, {**_base(True), "min_tokens": 3})
    assert status == 400 and "max_tokens" in json.loads(raw)["error"]["message"]


def test_vllm_extensions_give_what_the_engine_gives(server):
    tok = tokenizer()
    # Greedy (sampling with min_p: test_infer_sampling_extensions), so the comparison costs no sampler compile.
    extensions = {"repetition_penalty": 1.5, "min_p": 0.5, "min_tokens": 3, "stop_token_ids": [5, 6],
                  "ignore_eos": True, "top_k": -1}
    body = {"model": "tiny", "prompt": "a story", "max_tokens": 8, "temperature": 0, **extensions}
    status, raw = _post(server.port, TEXT, body)
    assert status == 200
    params = SamplingParams(temperature=0, max_new_tokens=8, repetition_penalty=1.5, min_p=0.5, min_tokens=3,
                            stop_token_ids=(5, 6), ignore_eos=True)
    plain = SamplingParams(temperature=0, max_new_tokens=8)
    want, without = engine().generate([GenerationRequest(tok.encode("a story"), p) for p in (params, plain)])
    assert json.loads(raw)["choices"][0]["text"] == want[0].text != without[0].text
    # guided_json is response_format json_schema under another name (as a schema object or JSON text).
    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 9}}}
    seeded = {**_base(True), "max_tokens": 16}
    texts = [json.loads(_post(server.port, CHAT, {**seeded, **extra})[1])["choices"][0]["message"]["content"]
             for extra in ({"guided_json": schema}, {"guided_json": json.dumps(schema)},
                           {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})]
    assert texts[0] == texts[1] == texts[2] and 1 <= json.loads(texts[0])["score"] <= 9
    status, raw = _post(server.port, CHAT, {**seeded, "guided_json": schema, "response_format": {"type": "json_object"}})
    assert status == 400
