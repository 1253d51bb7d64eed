"""`jaxwrite serve` under load, faults and hostile input (issue 17 item 5), on a real ASGI server
(uvicorn in a thread) on 127.0.0.1 over raw sockets and http.client, with no client retries:
64 concurrent clients with zero resets and every schema answer valid; a client that disconnects frees
its rows (counted in decode chunks, not seconds); each malformed request a JSON 4xx while the server
keeps serving; half-sent requests time out without holding the server."""
import concurrent.futures
import http.client
import json
import socket
import time

import pytest

from jaxwrite.infer import InferenceServer, Limits, ServeSettings
from test_infer_support import engine

SCORE = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}}}
LONG = 480            # tokens of the abandoned request (the tiny model's context is 512)


@pytest.fixture(scope="module")
def server():
    # Header timeout 5 s: long enough that a loaded machine never delays a client's first bytes past it;
    # the body timeout stays short (http.client sends headers and body in one write).
    limits = Limits(max_tokens=LONG, max_body_bytes=1 << 20, body_timeout_s=1.5)
    srv = InferenceServer(engine(max_batch=16), ServeSettings(port=0, model_name="tiny", limits=limits, quiet=True,
                                                              header_timeout_s=5, max_header_bytes=16 << 10))
    srv.start_background()
    yield srv
    srv.close()


def _chat(content="write a story", **kw):
    return {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 8,
            "temperature": 0, **kw}


def _post(conn: http.client.HTTPConnection, path: str, body) -> tuple[int, dict, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, dict(resp.getheaders()), resp.read()


def _events(raw: bytes) -> list[str]:
    """The data lines of an event stream (comments, e.g. pings, skipped)."""
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


def _client(port: int, i: int, turns: int = 1) -> list[str]:
    """One client: `turns` requests on one keep-alive connection; returns problems found (none expected)."""
    problems = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        for j in range(turns):
            kind = (i + j) % 4
            schema = {"response_format": {"type": "json_schema", "json_schema": {"schema": SCORE}}} if kind >= 2 else {}
            stream = kind % 2 == 1
            status, _, raw = _post(conn, "/v1/chat/completions",
                                   _chat(f"client {i} turn {j}", max_tokens=12, temperature=1.0, seed=i, stream=stream,
                                         **schema))
            if status != 200:
                problems.append(f"{i}/{j}: HTTP {status} {raw[:100]!r}")
                continue
            if stream:
                events = _events(raw)
                if events[-1] != "[DONE]":
                    problems.append(f"{i}/{j}: stream did not end with [DONE]")
                text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1])
            else:
                text = json.loads(raw)["choices"][0]["message"]["content"]
            if schema:
                value = json.loads(text)
                if set(value) != {"score"} or not isinstance(value["score"], int) or not 1 <= value["score"] <= 10:
                    problems.append(f"{i}/{j}: schema answer {text!r} is not valid")
    except (ConnectionError, OSError, http.client.HTTPException) as err:   # a reset, a refused connect
        problems.append(f"{i}: {type(err).__name__}: {err}")
    finally:
        conn.close()
    return problems


def test_64_concurrent_clients_lose_nothing(server):
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        # Half the clients send a second request on the same connection (HTTP/1.1 keep-alive).
        problems = [p for found in pool.map(lambda i: _client(server.port, i, 1 + i % 2), range(64)) for p in found]
    assert problems == []
    assert server.batcher.admissions >= 2 and server.batcher.largest_batch > 1   # they really were batched


def _abandon(srv, body: dict, stream: bool) -> None:
    """Sends a request and leaves once it is decoding: a streamed content delta arrived, or (not
    streaming) the engine holds the job and has run a decode chunk since. Waits on state, not time."""
    sock = socket.create_connection(("127.0.0.1", srv.port))
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    if stream:
        seen = b""
        while b'"content": "' not in seen.replace(b'"content": ""', b""):
            chunk = sock.recv(4096)
            assert chunk, "the stream ended early"
            seen += chunk
    else:
        chunks = srv.engine.stats.decode_chunks
        while srv.batcher.live_jobs() == 0 or srv.engine.stats.decode_chunks == chunks:
            time.sleep(0.01)
    sock.close()


@pytest.mark.parametrize("stream", [True, False])
def test_a_disconnecting_client_frees_its_rows(stream):
    """The abandoned request fills every row for LONG tokens; the short one sent after it can only run
    once those rows free. It finishes after far fewer decode chunks than LONG needs (so the rows were
    freed when the client left) and within a generous 60 s."""
    srv = InferenceServer(engine(max_batch=4, eos_ids=[]),
                          ServeSettings(port=0, model_name="tiny", limits=Limits(max_tokens=LONG), quiet=True))
    srv.start_background()
    try:
        stats = srv.engine.stats
        # Warm the decode shapes first, so the abandoned request is decoding when the client leaves.
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        assert _post(conn, "/v1/chat/completions", _chat(max_tokens=24, n=4))[0] == 200
        before = stats.decode_chunks
        _abandon(srv, _chat("a very long story", max_tokens=LONG, n=4, temperature=1.0, stream=stream), stream)
        start = time.monotonic()
        status, _, raw = _post(conn, "/v1/chat/completions", _chat("short", max_tokens=2))
        elapsed = time.monotonic() - start
        chunks = stats.decode_chunks - before
        conn.close()
    finally:
        srv.close()
    assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 2
    needed = LONG // srv.engine.chunk_steps          # chunks the abandoned request would have run
    assert chunks < needed // 2, f"{chunks} decode chunks ran: the abandoned rows were not freed"
    assert srv.batcher.cancelled_jobs == 1
    assert elapsed < 60


MALFORMED = [
    # (name, method, path, body or raw bytes, extra headers, status, code)
    ("unknown model", "POST", "/v1/chat/completions", _chat(model="gpt-9"), {}, 404, "model_not_found"),
    ("unknown role", "POST", "/v1/chat/completions", _chat() | {"messages": [{"role": "wizard", "content": "x"}]}, {},
     400, "invalid_messages"),
    ("200,000-deep JSON", "POST", "/v1/chat/completions", b"[" * 200_000 + b"]" * 200_000, {}, 400, "json_too_deep"),
    ("65-deep JSON", "POST", "/v1/chat/completions", b'{"a": ' * 65 + b"1" + b"}" * 65, {}, 400, "json_too_deep"),
    ("PUT", "PUT", "/v1/chat/completions", _chat(), {}, 405, "method_not_allowed"),
    ("DELETE", "DELETE", "/v1/chat/completions", None, {}, 405, "method_not_allowed"),
    ("PATCH", "PATCH", "/v1/chat/completions", _chat(), {}, 405, "method_not_allowed"),
    ("OPTIONS", "OPTIONS", "/v1/chat/completions", None, {}, 405, "method_not_allowed"),
    ("GET on a POST route", "GET", "/v1/completions", None, {}, 405, "method_not_allowed"),
    ("POST on a GET route", "POST", "/v1/models", _chat(), {}, 405, "method_not_allowed"),
    ("unknown path", "POST", "/v1/nothing", _chat(), {}, 404, "not_found"),
    ("unknown model id", "GET", "/v1/models/gpt-9", None, {}, 404, "model_not_found"),
    ("oversized header", "GET", "/v1/models", None, {"X-Big": "a" * 70_000}, 431, "headers_too_large"),
    ("not JSON", "POST", "/v1/chat/completions", b"{not json", {}, 400, "invalid_json"),
    ("not UTF-8", "POST", "/v1/chat/completions", b'{"messages": "\xff"}', {}, 400, "invalid_json"),
    ("a list body", "POST", "/v1/chat/completions", [1, 2], {}, 400, "invalid_json"),
    ("no messages", "POST", "/v1/chat/completions", {"model": "tiny"}, {}, 400, "invalid_messages"),
    ("empty messages", "POST", "/v1/chat/completions", {"messages": []}, {}, 400, "invalid_messages"),
    ("message not an object", "POST", "/v1/chat/completions", {"messages": ["hi"]}, {}, 400, "invalid_messages"),
    ("content an int", "POST", "/v1/chat/completions", _chat() | {"messages": [{"role": "user", "content": 5}]}, {},
     400, "invalid_messages"),
    ("image content part", "POST", "/v1/chat/completions",
     _chat() | {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, {},
     400, "invalid_messages"),
    ("model not a string", "POST", "/v1/chat/completions", _chat(model=5), {}, 400, "invalid_type"),
    ("temperature -1", "POST", "/v1/chat/completions", _chat(temperature=-1), {}, 400, "invalid_value"),
    ("temperature a string", "POST", "/v1/chat/completions", _chat(temperature="hot"), {}, 400, "invalid_type"),
    ("top_p 0", "POST", "/v1/chat/completions", _chat(top_p=0), {}, 400, "invalid_value"),
    ("n 0", "POST", "/v1/chat/completions", _chat(n=0), {}, 400, "invalid_value"),
    ("n 2000", "POST", "/v1/chat/completions", _chat(n=2000), {}, 400, "invalid_value"),
    ("max_tokens 0", "POST", "/v1/chat/completions", _chat(max_tokens=0), {}, 400, "invalid_value"),
    ("max_tokens over the limit", "POST", "/v1/chat/completions", _chat(max_tokens=10_000), {}, 400,
     "max_tokens_too_large"),
    ("max_tokens true", "POST", "/v1/chat/completions", _chat(max_tokens=True), {}, 400, "invalid_value"),
    ("stop a number", "POST", "/v1/chat/completions", _chat(stop=[1]), {}, 400, "invalid_type"),
    ("seed negative", "POST", "/v1/chat/completions", _chat(seed=-1), {}, 400, "invalid_value"),
    ("stream a string", "POST", "/v1/chat/completions", _chat(stream="yes"), {}, 400, "invalid_type"),
    ("stream_options without stream", "POST", "/v1/chat/completions", _chat(stream_options={"include_usage": True}),
     {}, 400, "invalid_value"),
    ("top_logprobs without logprobs", "POST", "/v1/chat/completions", _chat(top_logprobs=3), {}, 400, "invalid_value"),
    ("top_logprobs 21", "POST", "/v1/chat/completions", _chat(logprobs=True, top_logprobs=21), {}, 400,
     "invalid_value"),
    ("tools", "POST", "/v1/chat/completions", _chat(tools=[{"type": "function", "function": {"name": "f"}}]), {}, 400,
     "unsupported_field"),
    ("presence_penalty", "POST", "/v1/chat/completions", _chat(presence_penalty=1.0), {}, 400, "unsupported_field"),
    ("logit_bias", "POST", "/v1/chat/completions", _chat(logit_bias={"5": 10}), {}, 400, "unsupported_field"),
    ("response_format unknown", "POST", "/v1/chat/completions", _chat(response_format={"type": "yaml"}), {}, 400,
     "invalid_response_format"),
    ("json_schema without schema", "POST", "/v1/chat/completions", _chat(response_format={"type": "json_schema"}),
     {}, 400, "invalid_response_format"),
    ("schema keyword pattern", "POST", "/v1/chat/completions",
     _chat(response_format={"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a+"}}}),
     {}, 400, "unsupported_keyword"),
    ("schema keyword of the wrong type", "POST", "/v1/chat/completions",
     _chat(response_format={"type": "json_schema", "json_schema": {"schema": {"type": "object",
                                                                               "minProperties": "x"}}}),
     {}, 400, "invalid_schema"),
    ("schema type a nested list", "POST", "/v1/chat/completions",
     _chat(response_format={"type": "json_schema", "json_schema": {"schema": {"type": [["x"]]}}}), {}, 400,
     "invalid_schema"),
    ("schema bound beyond 30 digits", "POST", "/v1/chat/completions",
     _chat(response_format={"type": "json_schema", "json_schema": {"schema": {"type": "integer", "minimum": 1e40}}}),
     {}, 400, "unsupported_schema"),
    ("schema over the state budget", "POST", "/v1/chat/completions",
     _chat(max_tokens=64, response_format={"type": "json_schema", "json_schema": {"schema": {
         "type": "string", "maxLength": 100_000}}}), {}, 400, "schema_too_complex"),
    ("schema needs more tokens than allowed", "POST", "/v1/chat/completions",
     _chat(max_tokens=2, response_format={"type": "json_schema", "json_schema": {"schema": SCORE}}), {}, 400,
     "invalid_request"),
    ("prompt token out of range", "POST", "/v1/completions", {"prompt": [10 ** 7], "max_tokens": 2}, {}, 400,
     "invalid_request"),
    ("empty prompt", "POST", "/v1/completions", {"prompt": ""}, {}, 400, "invalid_request"),
    ("prompt an object", "POST", "/v1/completions", {"prompt": {"a": 1}}, {}, 400, "invalid_prompt"),
    ("completions logprobs 6", "POST", "/v1/completions", {"prompt": "a", "logprobs": 6}, {}, 400, "invalid_value"),
    ("echo", "POST", "/v1/completions", {"prompt": "a", "echo": True}, {}, 400, "unsupported_field"),
]


@pytest.mark.parametrize("name,method,path,body,headers,status,code", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests_get_a_json_4xx_and_serving_goes_on(server, name, method, path, body, headers, status,
                                                                 code):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    assert resp.status == status and resp.getheader("content-type", "").startswith("application/json")
    error = json.loads(payload)["error"]
    assert error["code"] == code and error["message"] and error["type"]
    health = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    health.request("GET", "/health")
    assert health.getresponse().status == 200


def test_head_gets_405_without_a_body(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("HEAD", "/v1/chat/completions")
    resp = conn.getresponse()
    assert resp.status == 405 and resp.getheader("content-type").startswith("application/json")


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


@pytest.mark.parametrize("raw,status,code", [
    (b"GARBAGE\r\n\r\n", 400, "invalid_http"),
    (b"POST /v1/chat/comp", 408, "request_timeout"),                                     # headers never finish
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a", 408, "request_timeout"),
    (b"", 408, "request_timeout"),                                                       # connects, sends nothing
    # A body over the limit is refused from its Content-Length, before it is sent (so no broken pipe).
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n{", 413,
     "request_too_large"),
])
def test_broken_http_gets_a_json_error(server, raw, status, code):
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(raw)
    reply = _read_all(sock)
    sock.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status) and b"application/json" in head.lower()
    assert json.loads(body)["error"]["code"] == code


def test_300_half_sent_bodies_do_not_hold_the_server(server):
    socks = []
    for _ in range(300):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"messages\": ")
        socks.append(s)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    status, _, raw = _post(conn, "/v1/chat/completions", _chat(max_tokens=2))   # served meanwhile
    conn.close()
    assert status == 200
    replies = [_read_all(s) for s in socks]                                       # each times out with 408
    for s in socks:
        s.close()
    assert all(r.startswith(b"HTTP/1.1 408") for r in replies)


def test_health_usage_chunk_logprobs_and_content_parts(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("GET", "/health")
    assert json.loads(conn.getresponse().read())["status"] == "ok"
    parts = [{"type": "text", "text": "write"}, {"type": "text", "text": "a story"}]
    plain = json.loads(_post(conn, "/v1/chat/completions", _chat("write\na story"))[2])
    via_parts = json.loads(_post(conn, "/v1/chat/completions",
                                 _chat() | {"messages": [{"role": "user", "content": parts}]})[2])
    assert via_parts["choices"][0]["message"] == plain["choices"][0]["message"]
    status, _, raw = _post(conn, "/v1/chat/completions", _chat(stream=True, stream_options={"include_usage": True},
                                                               logprobs=True, top_logprobs=2))
    chunks = [json.loads(e) for e in _events(raw)[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8
    content = [c for c in chunks if c["choices"] and c["choices"][0].get("logprobs")][0]["choices"][0]["logprobs"]
    assert len(content["content"]) == 8 and all(len(t["top_logprobs"]) == 2 for t in content["content"])
    # greedy: the chosen token is the most likely one
    assert all(t["logprob"] == max(a["logprob"] for a in t["top_logprobs"]) for t in content["content"])
    done = json.loads(_post(conn, "/v1/completions", {"prompt": "the story", "max_tokens": 4, "temperature": 0,
                                                       "logprobs": 1})[2])
    lp = done["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == 4 and len(lp["top_logprobs"][0]) == 1
    obj = json.loads(_post(conn, "/v1/chat/completions", _chat(max_tokens=40, temperature=1.0, seed=5,
                                                               response_format={"type": "json_object"}))[2])
    assert isinstance(json.loads(obj["choices"][0]["message"]["content"]), dict)
    conn.close()
