"""HttpChatModel (the HTTP chat model every judge URL becomes) against a real OpenAI-compatible server on
127.0.0.1 (scripted answers, in a thread).

`OpenAIStub` is also used by the WritingBench / LongBench-Write CLI tests.
"""
import dataclasses
import http.server
import json
import socket
import threading


from jaxwrite.chat import CHAT_SAMPLING, ChatModel, ChatRequest, HttpChatModel
from jaxwrite.chat.resolve import model_spec, open_chat_model


class OpenAIStub:
    """`POST /v1/chat/completions`. The last message's content selects the behaviour:
    "429once:<key>", "500once:<key>", "503once:<key>" fail the first call for <key> then answer;
    "malformed" sends a broken body; "400" a client error; "503always" always fails; anything else is
    answered by `answer(content)` (default: echo), unless `fail(content)` returns (status, body dict)."""

    def __init__(self, answer=lambda content: f"echo:{content}", fail=lambda content: None):
        self.answer = answer
        self.fail = fail
        self.calls: list[dict] = []
        self.headers: list[dict] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub._lock:
                    stub.calls.append(body)
                    stub.headers.append(dict(self.headers))
                status, extra, payload = stub._respond(self.path, body)
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _respond(self, path, body):
        if path != "/v1/chat/completions":
            return 404, {}, b'{"error": "not found"}'
        content = body["messages"][-1]["content"]
        for kind, status, extra in (("429once:", 429, {"Retry-After": "7"}), ("500once:", 500, {}),
                                    ("503once:", 503, {})):
            if content.startswith(kind):
                with self._lock:
                    first = content not in self._seen
                    self._seen.add(content)
                if first:
                    return status, extra, b'{"error": "try again"}'
        if content == "malformed":
            return 200, {}, b'{"choices": [ {"mess'
        if content == "400":
            return 400, {}, b'{"error": "bad request"}'
        if content == "503always":
            return 503, {}, b'{"error": "overloaded"}'
        failure = self.fail(content)
        if failure is not None:
            return failure[0], {}, json.dumps(failure[1]).encode()
        reply = {"choices": [{"message": {"role": "assistant", "content": self.answer(content)},
                              "finish_reason": "stop"}]}
        return 200, {}, json.dumps(reply).encode()


def _req(content: str, json_schema=None, **sampling) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": content},), dataclasses.replace(CHAT_SAMPLING, **sampling),
                       json_schema)


def _judge(url, **kw) -> HttpChatModel:
    judge = HttpChatModel(url, "critic-7b", **kw)
    judge.waits = []
    judge._sleep = judge.waits.append  # observe backoff without waiting
    return judge


def test_answers_in_order_with_official_fields(monkeypatch):
    monkeypatch.setenv("JW_TEST_KEY", "sk-secret-123")
    with OpenAIStub() as server:
        judge = _judge(server.url, api_key_env="JW_TEST_KEY", concurrency=4)
        reqs = [_req(f"q{i}", temperature=1.0, top_p=0.95, max_new_tokens=2048, seed=i) for i in range(10)]
        results = judge.chat(reqs)
    assert [r.text for r in results] == [f"echo:q{i}" for i in range(10)]
    assert all(r.ok and r.finish_reason == "stop" for r in results)
    sent = sorted(server.calls, key=lambda b: b["seed"])
    assert sent[3] == {"model": "critic-7b", "messages": [{"role": "user", "content": "q3"}],
                       "temperature": 1.0, "top_p": 0.95, "max_tokens": 2048, "seed": 3}
    assert all(h["Authorization"] == "Bearer sk-secret-123" for h in server.headers)
    assert "sk-secret" not in repr(judge) and "sk-secret" not in judge.label
    assert isinstance(judge, ChatModel)


def test_optional_fields_top_k_and_schema(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    schema = {"type": "object"}
    with OpenAIStub() as server:
        _judge(server.url).chat([_req("x", top_k=20, json_schema=schema)])
    body = server.calls[0]
    assert body["top_k"] == 20 and "seed" not in body
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}}
    assert "Authorization" not in server.headers[0]


def test_429_honours_retry_after_then_succeeds():
    with OpenAIStub() as server:
        judge = _judge(server.url)
        [result] = judge.chat([_req("429once:a")])
    assert result.ok and result.text == "echo:429once:a"
    assert judge.waits == [7.0] and len(server.calls) == 2


def test_500_backs_off_with_jitter_then_succeeds():
    with OpenAIStub() as server:
        judge = _judge(server.url, backoff_s=2.0)
        [result] = judge.chat([_req("500once:b")])
    assert result.ok and len(server.calls) == 2
    assert len(judge.waits) == 1 and 1.0 <= judge.waits[0] <= 3.0


def test_malformed_body_and_client_error_are_recorded_not_retried():
    with OpenAIStub() as server:
        judge = _judge(server.url)
        bad_body, client_error = judge.chat([_req("malformed"), _req("400")])
    assert not bad_body.ok and "malformed completion body" in bad_body.error and bad_body.text == ""
    assert not client_error.ok and client_error.error == "HTTP 400: bad request" and client_error.permanent
    assert bad_body.retryable and not bad_body.permanent   # a re-sample may get a whole body
    assert len(server.calls) == 2 and judge.waits == []


def test_persistent_5xx_gives_up_after_max_retries():
    with OpenAIStub() as server:
        judge = _judge(server.url, max_retries=3, backoff_s=0.5)
        [result] = judge.chat([_req("503always")])
    assert not result.ok and "gave up after 4 attempts" in result.error and "HTTP 503" in result.error
    assert result.retryable and not result.permanent   # transient: a later run may get through
    assert len(server.calls) == 4 and len(judge.waits) == 3
    # exponential: 0.5, 1, 2 (each times a jitter in [0.5, 1.5])
    for wait, base in zip(judge.waits, (0.5, 1.0, 2.0)):
        assert 0.5 * base <= wait <= 1.5 * base


def test_connection_refused_is_retried_then_recorded():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the call: nothing listens here
    judge = _judge(f"http://127.0.0.1:{port}/v1", max_retries=2, timeout_s=5)
    [result] = judge.chat([_req("x")])
    assert not result.ok and "gave up after 3 attempts" in result.error and len(judge.waits) == 2


def test_a_url_spec_builds_the_http_client():
    judge = open_chat_model(model_spec("http://127.0.0.1:1/v1/", "--judge"), name="m")
    assert isinstance(judge, HttpChatModel) and judge.url == "http://127.0.0.1:1/v1/chat/completions"
    assert judge.chat([]) == []
