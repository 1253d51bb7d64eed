"""A chat model behind any OpenAI-compatible `POST {base_url}/chat/completions` endpoint (standard
library only).

Requests in a batch run on a thread pool. Transient failures (429, 5xx, timeouts, refused or dropped
connections) are retried with exponential backoff and jitter, honouring `Retry-After`, and when they
persist are recorded as a retryable `error` (a later run may get through). Other 4xx answers are
permanent: recorded at once, with the server's own message, as a non-retryable error, since the same
request fails the same way again. A malformed body is recorded as retryable (the caller may re-sample).

Keys go only where they are meant to: no API key is sent unless the caller names the environment variable
that holds it (`api_key_env`); a key is never sent over plain http to a host other than this machine
unless `allow_plain_http` says so; and redirects are never followed (a 3xx is a permanent error naming
the Location), so a key cannot travel to another address. The key is read when the client is made and
never logged.
"""
from __future__ import annotations

import concurrent.futures
import email.utils
import http.client
import json
import os
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Sequence

from jaxwrite.chat.interface import ChatRequest, ChatResult, sampling_fields
from jaxwrite.common import InputError

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_MAX_WAIT_S = 60.0


class _Transient(Exception):
    """A failure worth retrying; carries the server's Retry-After (seconds) when it sent one."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Answers a 3xx as the HTTPError it is instead of following it (with the key) elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def is_loopback(host: str | None) -> bool:
    """Whether `host` names this machine (localhost, 127.0.0.0/8, ::1)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


def check_key_destination(url: str, key_source: str | None, allow_plain_http: bool,
                          flags: tuple[str, str] = ("api_key_env", "allow_plain_http")) -> None:
    """Raises InputError when a key from `key_source` would go over plain http to another machine
    without `allow_plain_http`; `flags` name the two settings in the message (e.g. CLI flags)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InputError(f"{url!r}: expected an http:// or https:// URL")
    if key_source and parsed.scheme == "http" and not is_loopback(parsed.hostname) and not allow_plain_http:
        raise InputError(f"{flags[0]} {key_source}: refusing to send an API key over plain http to "
                         f"{parsed.hostname}; use https, or pass {flags[1]} to send it anyway")


class HttpChatModel:
    """OpenAI-compatible chat completions with concurrent calls and bounded retries.

    api_key_env: the environment variable holding the API key, or None to send none (the default: a
    key goes only where the caller names its source). allow_plain_http: send that key over http:// to
    a host other than this machine (refused otherwise)."""

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None,
                 concurrency: int = 8, timeout_s: float = 120, max_retries: int = 5,
                 backoff_s: float = 1.0, allow_plain_http: bool = False):
        self.url = base_url.rstrip("/") + "/chat/completions"
        check_key_destination(self.url, api_key_env, allow_plain_http)
        self.model = model
        self.api_key_env = api_key_env
        self._key = None
        if api_key_env:
            self._key = os.environ.get(api_key_env) or None
            if self._key is None:
                raise InputError(f"api_key_env {api_key_env}: the environment variable is not set or empty")
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._sleep = time.sleep  # replaced in tests to observe waits without waiting

    @property
    def label(self) -> str:
        return f"http:{self.model}@{self.url}"

    def describe(self) -> dict[str, Any]:
        """An HTTP judge samples its verdict text: the official way (sampling comes with each request)."""
        return {"label": self.label, "transport": "http", "mode": "generate", "official": True,
                "settings": {"model": self.model, "url": self.url, "timeout_s": self.timeout_s,
                             "transient_retries": self.max_retries}}

    def identity(self) -> dict[str, Any]:
        """The call cache's name for this judge: the URL and the served model name (the server decides
        which weights answer; a new model behind the same name needs a new cache or --no-cache)."""
        return {"transport": "http", "url": self.url, "model": self.model}

    def __repr__(self) -> str:  # no key in here, ever
        return f"HttpChatModel(url={self.url!r}, model={self.model!r}, key_env={self.api_key_env!r})"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        workers = max(1, min(self.concurrency, len(requests)))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return list(pool.map(self._complete, requests))

    def _payload(self, req: ChatRequest) -> dict[str, Any]:
        s = req.sampling
        # top_k (sent only when set) is not in OpenAI's API; vLLM/SGLang-style servers accept it.
        body: dict[str, Any] = {"model": self.model, "messages": list(req.messages),
                                **{k: v for k, v in sampling_fields(s).items() if v is not None}}
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = list(s.stop)
        if req.json_schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "verdict", "schema": req.json_schema}}
        return body

    def _complete(self, req: ChatRequest) -> ChatResult:
        data = json.dumps(self._payload(req), ensure_ascii=False).encode("utf-8")
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return self._post_once(data)
            except _Transient as err:
                last = str(err)
                if attempt == self.max_retries:
                    break
                self._sleep(self._wait_s(attempt, err.retry_after))
        return ChatResult(text="", error=f"gave up after {self.max_retries + 1} attempts: {last}", retryable=True)

    def _wait_s(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, _MAX_WAIT_S)
        # Full-range jitter keeps concurrent workers from retrying in lockstep.
        return min(self.backoff_s * (2 ** attempt), _MAX_WAIT_S) * random.uniform(0.5, 1.5)

    def _post_once(self, data: bytes) -> ChatResult:
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:   # never followed: the key would go to another address
                return ChatResult(text="", retryable=False, error=f"HTTP {err.code}: redirect to "
                                  f"{err.headers.get('Location', '?')} not followed (use the final URL)")
            detail = _server_message(err.read())
            if err.code in _RETRY_STATUS:
                raise _Transient(f"HTTP {err.code}: {detail}",
                                 _retry_after_s(err.headers.get("Retry-After"))) from None
            return ChatResult(text="", error=f"HTTP {err.code}: {detail}", retryable=False)
        except (urllib.error.URLError, http.client.HTTPException, socket.timeout, TimeoutError,
                ConnectionError) as err:
            raise _Transient(f"{type(err).__name__}: {err}") from None
        return _parse_completion(raw)


def _parse_completion(raw: bytes) -> ChatResult:
    try:
        body = json.loads(raw)
        choice = body["choices"][0]
        text = choice["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("message.content is not a string")
    except (ValueError, KeyError, IndexError, TypeError) as err:
        return ChatResult(text="", error=f"malformed completion body ({type(err).__name__}: {err}): "
                                         f"{raw[:200].decode('utf-8', 'replace')}")
    return ChatResult(text=text, finish_reason=choice.get("finish_reason"), **_usage(body))


def _usage(body: dict) -> dict[str, int]:
    """{prompt_tokens, completion_tokens} of an OpenAI-style `usage`, each only when the server gave
    a non-negative integer (a server that reports none leaves the counts unknown, never 0)."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return {}
    return {k: usage[k] for k in ("prompt_tokens", "completion_tokens")
            if isinstance(usage.get(k), int) and not isinstance(usage[k], bool) and usage[k] >= 0}


def _server_message(raw: bytes) -> str:
    """The server's own words: an OpenAI-style body's error.message, else the body's start."""
    text = raw[:2000].decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return message[:300]
    except (ValueError, AttributeError):
        pass
    return text[:300]


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After is either delay-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
