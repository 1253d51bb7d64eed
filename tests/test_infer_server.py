"""The OpenAI-compatible server, end to end on 127.0.0.1: JSON and SSE, schemas, concurrency, 4xx."""
import concurrent.futures
import json
import urllib.error
import urllib.request

import pytest

from jaxwrite.infer import InferenceServer, Limits, ServeSettings
from test_infer_support import engine

KEY = "test-key"


@pytest.fixture(scope="module")
def server():
    srv = InferenceServer(engine(), ServeSettings(port=0, model_name="tiny", api_key=KEY, quiet=True,
                                                  limits=Limits(max_tokens=64, max_body_bytes=20_000)))
    srv.start_background()
    yield srv
    srv.close()


def _call(server, path, body=None, key=KEY, raw: bytes | None = None, method=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _chat(content="write a story", **kw):
    return {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 8,
            "temperature": 0, **kw}


def test_models_and_chat_completion(server):
    status, body = _call(server, "/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "tiny"
    status, body = _call(server, "/v1/chat/completions", _chat(n=2))
    out = json.loads(body)
    assert status == 200 and out["object"] == "chat.completion"
    assert [c["index"] for c in out["choices"]] == [0, 1]
    assert out["choices"][0]["message"]["content"] == out["choices"][1]["message"]["content"]
    assert out["choices"][0]["finish_reason"] == "length" and out["usage"]["completion_tokens"] == 16
    status, body = _call(server, "/v1/completions", {"prompt": "the story", "max_tokens": 5, "temperature": 0})
    assert status == 200 and json.loads(body)["choices"][0]["text"]


def test_streaming_matches_plain(server):
    plain = json.loads(_call(server, "/v1/chat/completions", _chat(max_tokens=20))[1])
    status, raw = _call(server, "/v1/chat/completions", _chat(max_tokens=20, stream=True))
    assert status == 200
    events = [e for e in raw.decode().split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == plain["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_json_schema_response_format(server):
    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                                               "reason": {"type": "string"}}}
    body = _chat(max_tokens=40, temperature=1.5, seed=3,
                 response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": schema}})
    status, raw = _call(server, "/v1/chat/completions", body)
    verdict = json.loads(json.loads(raw)["choices"][0]["message"]["content"])
    assert status == 200 and 1 <= verdict["score"] <= 10


def test_concurrent_requests_are_batched_and_correct(server):
    prompts = ["a story", "the judge", "river night", "plan answer"]
    alone = [json.loads(_call(server, "/v1/chat/completions", _chat(p))[1])["choices"][0]["message"]["content"]
             for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda p: _call(server, "/v1/chat/completions", _chat(p)), prompts))
    assert [json.loads(b)["choices"][0]["message"]["content"] for _, b in results] == alone
    assert all(s == 200 for s, _ in results)


def test_requests_join_a_running_batch():
    """Continuous batching in the server's batcher: a request submitted while a long sample decodes
    joins the batch between chunks and finishes first. The short request is submitted from the feed
    at the first chunk boundary, so the order does not depend on timing."""
    from jaxwrite.infer import GenerationRequest, SamplingParams
    from jaxwrite.infer.batcher import Batcher, Job, wait_all
    from test_infer_support import tokenizer
    tok = tokenizer()
    batcher = Batcher(engine(eos_ids=[]))
    feed, real_take = batcher._feed, batcher._feed.take
    jobs, finished = {}, []

    def take(rows, wait):
        if not wait and "short" not in jobs:    # a chunk boundary with the long sample running
            submit("short", "the judge", 3)
        return real_take(rows, wait)

    def submit(name, text, tokens):             # a job whose "done" event is recorded by the worker thread
        job = jobs[name] = Job(GenerationRequest(tok.encode(text), SamplingParams(temperature=0.0,
                                                                                  max_new_tokens=tokens)), False)
        put = job.events.put
        job.events.put = lambda event: (finished.append(name) if event[0] == "done" else None, put(event))
        batcher._waiting.put(job)

    feed.take = take
    try:
        submit("long", "a story", 200)
        long = wait_all(jobs["long"], timeout_s=120)
        short = wait_all(jobs["short"], timeout_s=120)
    finally:
        batcher.close()
    assert len(long[0].token_ids) == 200 and len(short[0].token_ids) == 3
    assert finished == ["short", "long"]
    assert batcher.admissions == 2 and batcher.largest_batch == 1


@pytest.mark.parametrize("path,body,raw,key,status,code", [
    ("/v1/chat/completions", None, b"{not json", KEY, 400, "invalid_json"),
    ("/v1/chat/completions", {"messages": []}, None, KEY, 400, "invalid_messages"),
    ("/v1/chat/completions", _chat(temperature=-1), None, KEY, 400, "invalid_value"),
    ("/v1/chat/completions", _chat(temperature="hot"), None, KEY, 400, "invalid_type"),
    ("/v1/chat/completions", _chat(max_tokens=10_000), None, KEY, 400, "max_tokens_too_large"),
    ("/v1/chat/completions", _chat(response_format={"type": "json_schema"}), None, KEY, 400,
     "invalid_response_format"),
    ("/v1/completions", {"prompt": [10 ** 7], "max_tokens": 2}, None, KEY, 400, "invalid_request"),
    ("/v1/completions", {"prompt": ""}, None, KEY, 400, "invalid_request"),
    ("/v1/chat/completions", _chat(), None, None, 401, "invalid_api_key"),
    ("/v1/chat/completions", _chat(), None, "wrong", 401, "invalid_api_key"),
    ("/v1/nothing", _chat(), None, KEY, 404, "not_found"),
    ("/v1/chat/completions", _chat("x" * 30_000), None, KEY, 413, "request_too_large"),
])
def test_bad_requests_get_4xx_and_server_keeps_serving(server, path, body, raw, key, status, code):
    got, payload = _call(server, path, body, key=key, raw=raw)
    error = json.loads(payload)["error"]
    assert got == status and error["code"] == code and error["message"] and error["type"]
    assert _call(server, "/v1/chat/completions", _chat(max_tokens=2))[0] == 200
