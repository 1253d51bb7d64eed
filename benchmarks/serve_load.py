"""Load on `jaxwrite serve`: the old standard-library server (git, before issue 17) beside the new
ASGI one, on the same engine and tiny model, in the same run.

    python benchmarks/serve_load.py [--clients 8 32 64 128] [--requests-per-client 3] [--max-tokens 16]

The model is the tiny preset (random weights) with a 4,096-piece SentencePiece tokenizer trained on
the shared corpus; the engine decodes 32 rows together. For each server and client count, a separate
client process starts that many threads at once; each sends its requests one after another (a chat
completion, greedy, --max-tokens, a new connection each, as a load tester does) with no retries and
records latency or the error (refused, reset, timeout, non-200). Reported: completed requests/s,
p50 / p99 latency of the completed ones, and errors. The last line is JSON.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _client_run(port: int, clients: int, per_client: int, max_tokens: int) -> dict:
    body = lambda i, j: json.dumps({"model": "tiny", "max_tokens": max_tokens, "temperature": 0,  # noqa: E731
                                    "messages": [{"role": "user", "content": f"story {i} {j}"}]}).encode()

    def one_client(i: int):
        out = []
        for j in range(per_client):
            start = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                conn.request("POST", "/v1/chat/completions", body=body(i, j),
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                conn.close()
                out.append(("ok", time.perf_counter() - start) if resp.status == 200 else (f"HTTP {resp.status}", 0))
            except Exception as err:   # refused, reset, timed out: what the issue counted
                out.append((type(err).__name__, 0))
        return out

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = [r for rs in pool.map(one_client, range(clients)) for r in rs]
    wall = time.perf_counter() - start
    latencies = sorted(t for kind, t in results if kind == "ok")
    errors: dict[str, int] = {}
    for kind, _ in results:
        if kind != "ok":
            errors[kind] = errors.get(kind, 0) + 1
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3) if latencies else None  # noqa: E731
    return {"requests": len(results), "completed": len(latencies), "errors": errors,
            "requests_per_s": round(len(latencies) / wall, 2), "p50_s": pick(0.5), "p99_s": pick(0.99),
            "wall_s": round(wall, 2)}


def _engine():
    from flax import nnx
    from jaxwrite.infer import Engine
    from jaxwrite.models import Transformer, get_preset
    from jaxwrite.text import load_tokenizer
    sys.path.insert(0, HERE)
    from schema_compile import _tokenizer
    tok = load_tokenizer(_tokenizer(4096))
    model = Transformer(get_preset("tiny", vocab_size=tok.vocab_size, max_seq_len=512), nnx.Rngs(0))
    return Engine(model, tok, max_batch=32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32, 64, 128])
    parser.add_argument("--requests-per-client", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--client", nargs=4, type=int, metavar=("PORT", "CLIENTS", "PER", "TOKENS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(_client_run(*args.client)))
        return
    sys.path.insert(0, HERE)
    from _legacy import legacy
    from jaxwrite.infer.server import InferenceServer, ServeSettings
    old = legacy(["server", "batcher", "openai_api"]).server
    engine = _engine()
    servers = {"old (http.server)": lambda: old.InferenceServer(engine, "127.0.0.1", 0, "tiny", quiet=True),
               "new (FastAPI + uvicorn)": lambda: InferenceServer(engine, ServeSettings(port=0, model_name="tiny",
                                                                                          quiet=True))}
    rows = []
    for name, make in servers.items():
        server = make()
        server.start_background()
        try:
            warm = _client_run(server.port, 4, 2, args.max_tokens)     # compile the decode shapes first
            assert warm["completed"] == 8, warm
            for clients in args.clients:
                cmd = [sys.executable, os.path.abspath(__file__), "--client", str(server.port), str(clients),
                       str(args.requests_per_client), str(args.max_tokens)]
                done = subprocess.run(cmd, capture_output=True, text=True, check=True)
                row = {"server": name, "clients": clients, **json.loads(done.stdout.strip().splitlines()[-1])}
                rows.append(row)
                print(f"{name:26s} {clients:4d} clients: {row['requests_per_s']:7.2f} req/s  p50 {row['p50_s']} s  "
                      f"p99 {row['p99_s']} s  completed {row['completed']}/{row['requests']}  errors {row['errors']}",
                      flush=True)
        finally:
            server.close()
    print(json.dumps({"max_tokens": args.max_tokens, "requests_per_client": args.requests_per_client, "rows": rows}))


if __name__ == "__main__":
    main()
