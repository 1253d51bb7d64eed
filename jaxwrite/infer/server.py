"""OpenAI-compatible HTTP server over the engine (standard library only).

GET /v1/models, POST /v1/chat/completions and /v1/completions, plain JSON or server-sent events
(`data: {...}\\n\\n` chunks, then `data: [DONE]`). Concurrent requests are batched by `Batcher`.
Every bad request gets a 4xx with {"error": {"message", "type", "code"}}; the server keeps serving.
"""
from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jaxwrite.infer.batcher import Batcher, wait_all
from jaxwrite.infer.engine import Engine
from jaxwrite.infer.openai_api import ApiError, chunk_body, completion_body, new_id, parse_request


class InferenceServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, engine: Engine, host: str = "127.0.0.1", port: int = 8000, model_name: str = "jaxwrite",
                 api_key: str | None = None, max_tokens_limit: int = 4096, max_request_bytes: int = 4 << 20,
                 gather_s: float = 0.005, quiet: bool = False):
        super().__init__((host, port), _Handler)
        self.engine = engine
        self.model_name = model_name
        self.api_key = api_key
        self.max_tokens_limit = max_tokens_limit
        self.max_request_bytes = max_request_bytes
        self.batcher = Batcher(engine, gather_s=gather_s)
        self.quiet = quiet

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start_background(self) -> threading.Thread:
        """Serves on a daemon thread (tests, notebooks); stop with `close()`."""
        thread = threading.Thread(target=self.serve_forever, name="jaxwrite-server", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.batcher.close()


class _Handler(BaseHTTPRequestHandler):
    server: InferenceServer
    server_version = "jaxwrite"

    def log_message(self, fmt, *args):  # the request line and status only, never headers (API keys)
        if not self.server.quiet:
            super().log_message(fmt, *args)

    # --- plumbing ----------------------------------------------------------------------------
    def _send_json(self, status: int, body: dict) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, err: ApiError) -> None:
        self._send_json(err.status, err.body())

    def _authorised(self) -> None:
        key = self.server.api_key
        if key is None:
            return
        given = self.headers.get("Authorization", "")
        if not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].encode(), key.encode()):
            raise ApiError(401, "missing or invalid API key (expected 'Authorization: Bearer <key>')",
                           "invalid_api_key", "authentication_error")

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise ApiError(411, "a Content-Length header is required", "length_required")
        if int(length) > self.server.max_request_bytes:
            self.close_connection = True
            raise ApiError(413, f"request body of {length} bytes exceeds the limit of "
                                f"{self.server.max_request_bytes}", "request_too_large")
        raw = self.rfile.read(int(length))
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ApiError(400, f"request body is not valid JSON ({err})", "invalid_json") from None

    # --- routes ------------------------------------------------------------------------------
    def do_GET(self):
        try:
            self._authorised()
            if self.path.rstrip("/") != "/v1/models":
                raise ApiError(404, f"no route GET {self.path}", "not_found")
            self._send_json(200, {"object": "list", "data": [
                {"id": self.server.model_name, "object": "model", "owned_by": "jaxwrite", "created": 0}]})
        except ApiError as err:
            self._fail(err)

    def do_POST(self):
        try:
            self._authorised()
            route = self.path.rstrip("/")
            if route not in ("/v1/chat/completions", "/v1/completions"):
                raise ApiError(404, f"no route POST {self.path}", "not_found")
            chat = route.endswith("chat/completions")
            body = self._read_body()
            request, stream = parse_request(body, self.server.engine.tokenizer, chat,
                                            self.server.max_tokens_limit)
            try:
                self.server.engine.check(request)
            except ValueError as err:
                raise ApiError(400, str(err), "invalid_request") from None
            job = self.server.batcher.submit(request, stream)
            if stream:
                self._stream(job, chat)
                return
            result = wait_all(job)
            if isinstance(result, str):
                raise ApiError(500, result, "engine_error", "server_error")
            self._send_json(200, completion_body(chat, self.server.model_name, result))
        except ApiError as err:
            self._fail(err)

    def _stream(self, job, chat: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.close_connection = True
        rid, model, n = new_id(chat), self.server.model_name, job.request.params.n
        finished = 0
        if chat:
            for i in range(n):
                self._event(chunk_body(chat, model, rid, i, "", None))
        while finished < n:
            kind, sample, payload = job.events.get()
            if kind == "delta":
                self._event(chunk_body(chat, model, rid, sample, payload, None))
            elif kind == "done":
                finished += 1
                if payload.error is not None:
                    self._event(ApiError(400, payload.error).body())
                    continue
                self._event(chunk_body(chat, model, rid, sample, None, payload.finish_reason))
            else:
                self._event(ApiError(500, payload, "engine_error", "server_error").body())
                break
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, body: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(body, ensure_ascii=False).encode("utf-8") + b"\n\n")
        self.wfile.flush()
