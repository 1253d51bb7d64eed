"""Keys go only where they are meant to (issue 17 item 4): no API key is sent unless the user names the
variable that holds it, never over plain http to another machine without an explicit flag, and never
across a redirect (the client follows none). Against real servers on 127.0.0.1."""
import contextlib
import http.server
import json
import threading

import pytest

from jaxwrite.chat import HttpChatModel
from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError
from test_evals_judge_http import OpenAIStub, _req

SECRET = "sk-secret-417"


@contextlib.contextmanager
def redirector(location: str, status: int = 302):
    """Answers every POST with `status` and `Location: location`; records the headers it got."""
    seen: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(dict(self.headers))
            self.send_response(status)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def test_no_key_is_sent_unless_its_source_is_named(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("JW_KEY", SECRET)
    with OpenAIStub() as server:
        assert HttpChatModel(server.url, "m", max_retries=0).chat([_req("q")])[0].ok
        assert HttpChatModel(server.url, "m", api_key_env="JW_KEY", max_retries=0).chat([_req("q")])[0].ok
    assert "Authorization" not in server.headers[0]                 # OPENAI_API_KEY set, but not named
    assert server.headers[1]["Authorization"] == f"Bearer {SECRET}"   # the control: named, so sent


def test_a_named_but_empty_variable_is_an_error(monkeypatch):
    monkeypatch.delenv("JW_MISSING", raising=False)
    with pytest.raises(InputError, match="JW_MISSING: the environment variable is not set"):
        HttpChatModel("http://127.0.0.1:9/v1", "m", api_key_env="JW_MISSING")


@pytest.mark.parametrize("url,ok", [("http://10.1.2.3:8000/v1", False), ("http://judge.example/v1", False),
                                    ("https://judge.example/v1", True), ("http://127.0.0.1:8000/v1", True),
                                    ("http://localhost:8000/v1", True), ("http://[::1]:8000/v1", True)])
def test_plain_http_to_another_machine_needs_the_flag(monkeypatch, url, ok):
    monkeypatch.setenv("JW_KEY", SECRET)
    if ok:
        HttpChatModel(url, "m", api_key_env="JW_KEY")
    else:
        with pytest.raises(InputError, match="refusing to send an API key over plain http"):
            HttpChatModel(url, "m", api_key_env="JW_KEY")
        HttpChatModel(url, "m", api_key_env="JW_KEY", allow_plain_http=True)   # the explicit flag
    HttpChatModel(url, "m")   # no key: nothing to protect, any URL


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirects_are_not_followed_and_the_key_stays(monkeypatch, status):
    monkeypatch.setenv("JW_KEY", SECRET)
    with OpenAIStub() as target, redirector(target.url + "/chat/completions", status) as (url, seen):
        [result] = HttpChatModel(url, "m", api_key_env="JW_KEY", max_retries=3).chat([_req("q")])
    assert not result.ok and not result.retryable
    assert f"HTTP {status}: redirect to {target.url}/chat/completions not followed" in result.error
    assert len(seen) == 1 and target.calls == []      # one call, nothing reached the other address


def _score_argv(tmp_path, url, *extra):
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"index": 1, "response": "text"}) + "\n")
    return ["eval", "writingbench", "score", "--responses", str(responses), "--judge", url,
            "--judge-model", "critic", "--output", str(tmp_path / "s.jsonl"), *extra]


@pytest.mark.parametrize("argv", [
    lambda t: _score_argv(t, "http://10.9.9.9/v1", "--judge-api-key-env", "JW_KEY"),
    lambda t: ["eval", "refinebench", "--model", "http://10.9.9.9/v1", "--model-name", "m",
               "--model-api-key-env", "JW_KEY", "--judge", "http://127.0.0.1:9/v1", "--judge-model", "j",
               "--output", str(t / "rb")],
    lambda t: ["prep", "criteria", "--generator", "http://10.9.9.9/v1", "--generator-model", "m",
               "--generator-api-key-env", "JW_KEY", "--queries", str(t / "q.jsonl"), "--output", str(t / "o.jsonl")],
])
def test_every_url_flag_family_refuses_a_plain_http_key_in_one_line(monkeypatch, tmp_path, capsys, argv):
    monkeypatch.setenv("JW_KEY", SECRET)
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": 1, "query": "write"}) + "\n")
    assert cli_main(argv(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refusing to send an API key over plain http to 10.9.9.9" in err
    assert "-allow-plain-http" in err and SECRET not in err
