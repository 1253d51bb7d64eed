"""OpenAI-compatible HTTP server over the engine: the ASGI app (http_app.py) on uvicorn.

What the transport gives (the issue-17 load test lost connections on the old standard-library
server): HTTP/1.1 keep-alive; a listen backlog of `backlog` (default 2048, not Python's 5); an event
loop that keeps accepting while the engine decodes on its own thread (batcher.py); a header timeout
(a connection that has not sent complete headers in `header_timeout_s` gets 408) and a body timeout;
header, body and JSON-nesting limits; and JSON bodies for every error, the ones uvicorn itself
answers included (malformed requests, oversized headers: 431).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import socket
import threading

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from jaxwrite.infer.batcher import Batcher
from jaxwrite.infer.engine import Engine
from jaxwrite.infer.http_app import HeaderLimit, Limits, build_app


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """How `InferenceServer` listens and what it accepts: one object from `jaxwrite serve`'s flags down.

    Attributes:
      host: the address to bind (127.0.0.1: this machine only).
      port: the port (0 picks a free one; `InferenceServer.port` says which).
      model_name: the model id /v1/models reports and requests must name.
      api_key: the key clients must send as Bearer (None: none asked); never shown in a repr.
      limits: what one request may send and take, and how long its body may take (`Limits`).
      backlog: listen queue of connections not yet accepted.
      max_header_bytes: largest request line + headers accepted (else 431).
      header_timeout_s: a connection must send a request's headers within this long (else 408).
      keep_alive_s: how long an idle connection stays open.
      gather_s: how long the batcher waits for requests to join a batch.
      quiet: no access log, warnings only.
    """
    host: str = "127.0.0.1"
    port: int = 8000
    model_name: str = "jaxwrite"
    api_key: str | None = dataclasses.field(default=None, repr=False)
    limits: Limits = Limits()
    backlog: int = 2048
    max_header_bytes: int = 32 << 10
    header_timeout_s: float = 30.0
    keep_alive_s: float = 30.0
    gather_s: float = 0.005
    quiet: bool = False


class InferenceServer:
    """Serves `engine` as `settings` say until `close()`."""

    def __init__(self, engine: Engine, settings: ServeSettings = ServeSettings()):
        self.engine = engine
        self.settings = settings
        self.model_name = settings.model_name
        # Bound here, so `port` is known at once and the backlog is ours.
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((settings.host, settings.port))
            self._socket.listen(settings.backlog)
        except OSError:
            self._socket.close()
            raise
        self._socket.setblocking(False)
        self.batcher = Batcher(engine, gather_s=settings.gather_s)
        self.app = HeaderLimit(build_app(engine, self.batcher, settings.model_name, settings.api_key, settings.limits),
                               settings.max_header_bytes)
        config = uvicorn.Config(self.app, backlog=settings.backlog, http=_protocol(settings.header_timeout_s),
                                lifespan="off", ws="none", timeout_keep_alive=settings.keep_alive_s,
                                h11_max_incomplete_event_size=settings.max_header_bytes,
                                log_level="warning" if settings.quiet else "info", access_log=not settings.quiet,
                                timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        if settings.quiet:
            logging.getLogger("uvicorn.error").setLevel(logging.WARNING)

    @property
    def port(self) -> int:
        return self._socket.getsockname()[1]

    def serve_forever(self) -> None:
        """Serves on this thread until `close()` (or Ctrl-C, when this is the main thread)."""
        self._server.run(sockets=[self._socket])

    def start_background(self) -> threading.Thread:
        """Serves on a daemon thread (tests, notebooks); returns once it accepts; stop with `close()`."""
        self._thread = threading.Thread(target=self.serve_forever, name="jaxwrite-server", daemon=True)
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            self._thread.join(0.01)
        return self._thread

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._socket.close()
        self.batcher.close()


def _error_bytes(status: int, message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}}).encode()


def _protocol(header_timeout_s: float):
    """uvicorn's h11 protocol, answering its own errors in JSON and timing out slow headers."""

    class JsonH11Protocol(H11Protocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._header_timer: asyncio.TimerHandle | None = None
            self._last_error: h11.RemoteProtocolError | None = None
            next_event = self.conn.next_event

            def recorded_next_event():
                try:
                    return next_event()
                except h11.RemoteProtocolError as err:
                    self._last_error = err
                    raise
            self.conn.next_event = recorded_next_event

        def connection_made(self, transport):
            super().connection_made(transport)
            self._served = False
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._arm_header_timer()

        def on_response_complete(self) -> None:
            self._served = True
            super().on_response_complete()
            self._arm_header_timer()

        def connection_lost(self, exc):
            self._disarm()
            super().connection_lost(exc)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_pending(self) -> bool:
            """Waiting for a request's headers: a new connection, or part of a request line or headers
            buffered. (An idle keep-alive connection is uvicorn's keep-alive timer's.)"""
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return False
            return not self._served or bool(self.conn.trailing_data[0])

        def _arm_header_timer(self) -> None:
            if not self._headers_pending():
                self._disarm()
            elif self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _header_timeout(self) -> None:
            self._header_timer = None
            if self._headers_pending():
                self._send_error(408, f"request headers did not arrive within {header_timeout_s:g} s",
                                 "request_timeout")

        def send_400_response(self, msg: str) -> None:
            err = self._last_error
            status = getattr(err, "error_status_hint", 400) if err is not None else 400
            detail = str(err) if err is not None and str(err) else msg
            code = "headers_too_large" if status == 431 else "invalid_http"
            self._send_error(status, f"malformed HTTP request: {detail}", code)

        def _send_error(self, status: int, message: str, code: str) -> None:
            body = _error_bytes(status, message, code)
            head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
            if not self.transport.is_closing():
                self.transport.write(head + body)
                self.transport.close()

    return JsonH11Protocol


_REASONS = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large", 414: "URI Too Long",
            431: "Request Header Fields Too Large"}
