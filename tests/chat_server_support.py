"""A scripted OpenAI-compatible chat server on 127.0.0.1 for end-to-end CLI tests.

`answer(body)` receives each parsed /v1/chat/completions request body and returns the assistant's
text, which the server sends with finish_reason "stop"; or a (status, message) pair, which it sends as
that HTTP status with an OpenAI-style error body `{"error": {"message": message}}` (e.g. a 400 a
server gives a prompt longer than its context, or a 503). With `usage`, each answer carries the
OpenAI `usage` object `usage(body, text)` returns (as vLLM and jaxwrite's own server send it).
"""
import contextlib
import http.server
import json
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def scripted_chat_server(answer: Callable[[dict], "str | tuple[int, str]"],
                         usage: "Callable[[dict, str], dict] | None" = None) -> Iterator[str]:
    """Yields the server's base URL (".../v1") while it serves in a background thread."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            reply = answer(body)
            if isinstance(reply, tuple):
                status, message = reply
                data = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
            else:
                status = 200
                out = {"choices": [{"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]}
                if usage is not None:
                    out["usage"] = usage(body, reply)
                data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
