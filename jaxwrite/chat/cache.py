"""The judge-call cache: one SQLite file of chat answers, content-addressed, shared by every command
(`eval ...`, `prep ...`) and safe for several processes at once.

A call's key is the sha256 of what decides its answer: the model's identity (`model_identity`: an
endpoint's URL and served name, or a local model's weights and tokenizer digests and judge mode), the
exact messages, every sampling parameter (seed included) and the JSON schema. A re-run, a resumed run, a
report rebuild or another command asking the same pays nothing; a new seed is a new key.

What is kept: answers only. An error (timeout, 5xx, 4xx, an engine refusal) is never stored, so a failure
is never served as an answer, and an answer the caller turned down (`reject`: a verdict that did not
parse) is marked and not served again, so a re-run asks the model afresh, as it did before the cache. A
request sampled at a temperature above 0 without a seed has no reproducible answer: it is asked every time.

The file: SQLite in WAL mode with a busy timeout, writes in short transactions, so processes on one
machine share it (not over a network file system). A file that is not a jaxwrite cache is refused in one
line, never written to.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import sqlite3
import threading
import time
from typing import Any, Iterable, Mapping, Sequence

from jaxwrite.chat.interface import ChatRequest, ChatResult
from jaxwrite.common.errors import InputError

CACHE_FORMAT = "jaxwrite-call-cache"
CACHE_VERSION = 1
CACHE_ENV = "JAXWRITE_CALL_CACHE"   # overrides the default path (tests point it at a temporary folder)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_META_TABLE = "jaxwrite_cache_meta"
_BUSY_S = 120   # how long a process waits for another's write before it gives up
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_META_TABLE} (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, status TEXT NOT NULL, text TEXT NOT NULL, "
    "finish_reason TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, wall_s REAL, identity TEXT, "
    "created REAL NOT NULL)",
)


def default_cache_path() -> pathlib.Path:
    """$JAXWRITE_CALL_CACHE, else calls.sqlite in the user cache ($XDG_CACHE_HOME/jaxwrite, else
    ~/.cache/jaxwrite), beside the pinned models."""
    if os.environ.get(CACHE_ENV):
        return pathlib.Path(os.path.expanduser(os.environ[CACHE_ENV]))
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(root) / "jaxwrite" / "calls.sqlite"


def cacheable(request: ChatRequest) -> bool:
    """Whether the request has one reproducible answer: greedy, or sampled with a seed."""
    return request.sampling.seed is not None or request.sampling.temperature == 0


def request_key(identity: Mapping[str, Any], request: ChatRequest) -> str:
    """sha256 of the canonical JSON of (identity, messages, sampling, schema)."""
    sampling = {name: getattr(request.sampling, name) for name in sorted(request.sampling.__dataclass_fields__)}
    body = {"format": CACHE_VERSION, "identity": identity, "messages": list(request.messages),
            "sampling": sampling, "schema": request.json_schema}
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=list)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CallCache:
    """One cache file (see the module note). `get` serves stored answers; `put` stores answers (errors
    are skipped); `reject` marks answers a caller turned down so they are not served again."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path).expanduser()
        _refuse_foreign(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=_BUSY_S, isolation_level=None, check_same_thread=False)
        try:
            self._db.execute(f"PRAGMA busy_timeout = {_BUSY_S * 1000}")
            _while_locked(lambda: self._db.execute("PRAGMA journal_mode = WAL"))
            _while_locked(self._init_schema)
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise InputError(f"not a jaxwrite call cache ({err}); expected a file written by --cache, or a new path",
                             path=str(self.path)) from None
        except BaseException:
            self._db.close()
            raise

    def _init_schema(self) -> None:
        with self._write():
            tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and _META_TABLE not in tables:
                raise InputError("an SQLite database that is not a jaxwrite call cache (no "
                                 f"{_META_TABLE} table); expected a file written by --cache, or a new path",
                                 path=str(self.path))
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._db.execute(f"INSERT OR IGNORE INTO {_META_TABLE} VALUES ('format', ?), ('version', ?)",
                             (CACHE_FORMAT, str(CACHE_VERSION)))
            meta = dict(self._db.execute(f"SELECT name, value FROM {_META_TABLE}"))
        if meta.get("format") != CACHE_FORMAT:
            raise InputError(f"not a jaxwrite call cache (format {meta.get('format')!r}); expected "
                             f"{CACHE_FORMAT!r}", path=str(self.path))
        if meta.get("version") != str(CACHE_VERSION):
            raise InputError(f"jaxwrite call cache version {meta.get('version')}; expected {CACHE_VERSION} "
                             "(written by another jaxwrite version: use a new --cache path)", path=str(self.path))

    def _write(self):
        return _Transaction(self._db, self._lock)

    def get(self, keys: Iterable[str]) -> dict[str, ChatResult]:
        """{key: stored answer} for the keys that have one (marked `cached`)."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, ChatResult] = {}
        with self._lock:
            for start in range(0, len(keys), 500):   # SQLite's bound-parameter limit
                part = keys[start:start + 500]
                rows = self._db.execute(
                    "SELECT key, text, finish_reason, prompt_tokens, completion_tokens FROM calls "
                    f"WHERE status = 'ok' AND key IN ({','.join('?' * len(part))})", part)
                for key, text, finish, prompt, completion in rows:
                    found[key] = ChatResult(text=text, finish_reason=finish, prompt_tokens=prompt,
                                            completion_tokens=completion, cached=True)
        return found

    def put(self, entries: Sequence[tuple[str, ChatResult, float, Mapping[str, Any]]]) -> int:
        """Stores (key, result, wall seconds of its batch share, identity) for every answer; errors are
        not stored. Returns how many were stored."""
        rows = [(key, "ok", r.text, None if r.finish_reason is None else str(r.finish_reason), r.prompt_tokens,
                 r.completion_tokens, wall, json.dumps(identity, sort_keys=True), time.time())
                for key, r, wall, identity in entries if r.ok]
        if rows:
            with self._write():
                self._db.executemany("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def reject(self, keys: Iterable[str]) -> None:
        """Marks stored answers the caller turned down: never served again (a re-run asks afresh)."""
        keys = [(k,) for k in dict.fromkeys(keys)]
        if keys:
            with self._write():
                self._db.executemany("UPDATE calls SET status = 'rejected' WHERE key = ?", keys)

    def count(self) -> int:
        """Answers stored and servable."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls WHERE status = 'ok'").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT under the connection's lock (one writer at a time across processes,
    waiting up to the busy timeout)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock):
        self._db, self._lock = db, lock

    def __enter__(self):
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, kind, value, tb):
        try:
            self._db.execute("COMMIT" if kind is None else "ROLLBACK")
        finally:
            self._lock.release()
        return False


def _while_locked(step):
    """step(), again while SQLite says the file is locked, up to the busy timeout. Switching a new file to
    WAL takes an exclusive lock and SQLite answers "locked" at once rather than wait, so processes opening
    one new cache together would otherwise see a spurious failure."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            return step()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _refuse_foreign(path: pathlib.Path) -> None:
    """A file that exists and is not an SQLite database (nor empty) is refused before SQLite touches it."""
    if path.is_dir():
        raise InputError("expected a cache file, found a directory", path=str(path))
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if head != _SQLITE_MAGIC:
        raise InputError("not a jaxwrite call cache (not an SQLite database); expected a file written by --cache, "
                         "or a new path", path=str(path))
