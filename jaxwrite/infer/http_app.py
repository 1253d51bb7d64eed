"""The server's ASGI application (FastAPI): routes, limits, JSON errors, streaming and cancellation.

GET /health, GET /v1/models (and /v1/models/{id}), POST /v1/chat/completions and /v1/completions,
plain JSON or server-sent events (sse-starlette: `data: {...}` chunks, then `data: [DONE]`).
Every 4xx/5xx is JSON {"error": {"message", "type", "code"}}: 404 for an unknown path or model, 405
for a wrong method, 413 for a body over the limit, 408 for a body that does not arrive in time, 400
for a body that is not JSON or nests deeper than the limit. Request parsing, tokenising and schema
compilation run on worker threads, so the event loop keeps accepting while they work.

A request whose client disconnects (streaming or not) is cancelled: the engine ends its samples at
the next decode-chunk boundary and its rows go to the requests behind it.
"""
from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from jaxwrite.infer.batcher import Batcher
from jaxwrite.infer.openai_api import ApiError, ParsedRequest, parse_request
from jaxwrite.infer.openai_bodies import (TokenText, chat_logprobs, chunk_body, completion_body, new_id,
                                          text_logprobs, usage_chunk)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may send and take (`ServeSettings.limits`)."""
    max_tokens: int = 4096          # largest max_tokens a request may ask for
    max_body_bytes: int = 4 << 20   # largest request body
    max_json_depth: int = 64        # deepest nesting of the request's JSON
    body_timeout_s: float = 30.0    # a body must arrive within this long (else 408)
    sse_ping_s: float = 15.0        # keep-alive comment interval on event streams


class _LoopEvents:
    """A job's event sink for the engine thread that hands events to this request's coroutine."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._queue: asyncio.Queue = asyncio.Queue()

    def put(self, event) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:   # the loop closed (server shutting down): nobody is listening
            pass

    async def get(self):
        return await self._queue.get()


class _ClientGone(Exception):
    pass


def _json_error(err: ApiError, close: bool = False) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers={"Connection": "close"} if close else None)


def _depth(value: Any, limit: int) -> bool:
    """Whether `value` nests at most `limit` levels (iterative: deep input cannot blow the stack)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > limit:
                return False
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


class HeaderLimit:
    """ASGI wrapper: a request whose line and headers exceed `limit` bytes gets 431 (JSON) unread. (h11
    bounds only headers that arrive in pieces; this bounds them however they arrive.)"""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            size = len(scope.get("raw_path") or b"") + sum(len(k) + len(v) + 4 for k, v in scope["headers"])
            if size > self.limit:
                response = _json_error(ApiError(431, f"request headers of {size} bytes exceed the limit of "
                                                     f"{self.limit}", "headers_too_large"), close=True)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(engine, batcher: Batcher, model_name: str, api_key: str | None, limits: Limits) -> FastAPI:
    app = FastAPI(title="jaxwrite", docs_url=None, redoc_url=None, openapi_url=None)
    token_text = TokenText(engine.tokenizer)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, err: ApiError):
        return _json_error(err, close=err.status in (408, 413))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException):
        if err.status_code == 405:
            allowed = err.headers.get("Allow", "") if err.headers else ""
            return _json_error(ApiError(405, f"method {request.method} not allowed on {request.url.path}"
                                             f"{' (allowed: ' + allowed + ')' if allowed else ''}",
                                        "method_not_allowed"))
        if err.status_code == 404:
            return _json_error(ApiError(404, f"no route {request.method} {request.url.path}", "not_found"))
        return _json_error(ApiError(err.status_code, str(err.detail), "http_error"))

    @app.exception_handler(Exception)
    async def _internal(request: Request, err: Exception):
        return _json_error(ApiError(500, f"internal error: {type(err).__name__}: {err}", "internal_error",
                                    "server_error"))

    def authorise(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].encode(), api_key.encode()):
            raise ApiError(401, "missing or invalid API key (expected 'Authorization: Bearer <key>')",
                           "invalid_api_key", "authentication_error")

    async def read_json(request: Request) -> Any:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limits.max_body_bytes):
            raise ApiError(413, f"request body of {length} bytes exceeds the limit of {limits.max_body_bytes}",
                           "request_too_large")
        chunks: list[bytes] = []
        size = 0

        async def pull():
            nonlocal size
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise ApiError(413, f"request body exceeds the limit of {limits.max_body_bytes} bytes",
                                   "request_too_large")
                chunks.append(chunk)

        try:
            await asyncio.wait_for(pull(), limits.body_timeout_s)
        except asyncio.TimeoutError:
            raise ApiError(408, f"request body did not arrive within {limits.body_timeout_s:g} s",
                           "request_timeout") from None
        try:
            body = json.loads(b"".join(chunks).decode("utf-8"))
        except RecursionError:
            raise ApiError(400, f"request body nests deeper than {limits.max_json_depth} levels",
                           "json_too_deep") from None
        except (UnicodeDecodeError, ValueError) as err:
            raise ApiError(400, f"request body is not valid JSON ({err})", "invalid_json") from None
        if not _depth(body, limits.max_json_depth):
            raise ApiError(400, f"request body nests deeper than {limits.max_json_depth} levels", "json_too_deep")
        return body

    def prepare(body: Any, chat: bool) -> ParsedRequest:
        """Parse, tokenise, validate and compile any schema (a worker thread: may take a while)."""
        parsed = parse_request(body, engine.tokenizer, chat, limits.max_tokens, model_name)
        try:
            engine.check(parsed.request)
        except ValueError as err:
            status = getattr(err, "status", 400)
            raise ApiError(status, str(err), getattr(err, "code", "invalid_request")) from None
        return parsed

    async def until_disconnect(request: Request, work):
        """Awaits `work`, or raises _ClientGone as soon as the client disconnects."""
        async def gone():
            while (await request.receive())["type"] != "http.disconnect":
                pass
        task, watch = asyncio.ensure_future(work), asyncio.ensure_future(gone())
        try:
            done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if task in done:
            return task.result()
        task.cancel()
        raise _ClientGone

    async def complete(request: Request, chat: bool):
        authorise(request)
        body = await read_json(request)
        parsed = await asyncio.to_thread(prepare, body, chat)
        events = _LoopEvents(asyncio.get_running_loop())
        job = batcher.submit(parsed.request, parsed.stream, events)
        if parsed.stream:
            return EventSourceResponse(_stream(job, events, parsed, chat), sep="\n", ping=limits.sse_ping_s)
        finished = False
        try:
            result = await until_disconnect(request, _collect(events, parsed.request.params.n))
            finished = True
        except _ClientGone:
            return JSONResponse({}, status_code=499)   # nobody reads it; the job was cancelled below
        finally:
            if not finished:
                job.cancel()
        if isinstance(result, ApiError):
            raise result
        return JSONResponse(completion_body(chat, model_name, result, parsed.logprobs, token_text))

    async def _stream(job, events: _LoopEvents, parsed: ParsedRequest, chat: bool):
        rid, n = new_id(chat), parsed.request.params.n
        finished, generated, prompt_tokens = 0, 0, len(parsed.request.prompt_ids)
        sent_logprobs = [0] * n
        try:
            if chat:
                for i in range(n):
                    yield _data(chunk_body(chat, model_name, rid, i, "", None))
            while finished < n:
                kind, sample, payload = await events.get()
                if kind == "delta":
                    yield _data(chunk_body(chat, model_name, rid, sample, payload, None))
                elif kind == "done":
                    finished += 1
                    if payload.error is not None:
                        yield _data(ApiError(400, payload.error).body())
                        continue
                    generated += len(payload.token_ids)
                    lp = None
                    if parsed.logprobs is not None:   # the sample's token logprobs ride on its last chunk
                        entries = (payload.logprobs or [])[sent_logprobs[sample]:]
                        lp = (chat_logprobs(entries, token_text, parsed.logprobs) if chat
                              else text_logprobs(entries, token_text, parsed.logprobs))
                    yield _data(chunk_body(chat, model_name, rid, sample, None, payload.finish_reason, lp))
                else:
                    yield _data(ApiError(500, payload, "engine_error", "server_error").body())
                    break
            if parsed.include_usage:
                yield _data(usage_chunk(chat, model_name, rid, prompt_tokens, generated))
            yield {"data": "[DONE]"}
        finally:
            if finished < n:     # the client left (or the stream broke): free the rows
                job.cancel()

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": model_name, "running_requests": batcher.live_jobs()}

    @app.get("/v1/models")
    async def models(request: Request):
        authorise(request)
        return {"object": "list", "data": [_model_card(model_name)]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request):
        authorise(request)
        if model_id != model_name:
            raise ApiError(404, f"the model '{model_id}' does not exist here; this server serves '{model_name}'",
                           "model_not_found")
        return _model_card(model_name)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, False)

    return app


def _model_card(name: str) -> dict:
    return {"id": name, "object": "model", "owned_by": "jaxwrite", "created": 0}


def _data(body: dict) -> dict:
    return {"data": json.dumps(body, ensure_ascii=False)}


async def _collect(events: _LoopEvents, n: int):
    """All n samples of a non-streaming job in order, or the ApiError to answer with."""
    out = {}
    while len(out) < n:
        kind, sample, payload = await events.get()
        if kind == "error":
            return ApiError(500, payload, "engine_error", "server_error")
        if kind == "done":
            if payload.error is not None:
                return ApiError(400, payload.error)
            out[sample] = payload
    return [out[i] for i in range(n)]
