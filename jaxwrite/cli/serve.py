"""`jaxwrite serve --model DIR`: an OpenAI-compatible HTTP server over the inference engine."""
from __future__ import annotations

import os
import sys

from jaxwrite.common import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="OpenAI-compatible server (/v1/models, /v1/chat/completions, /v1/completions)",
        description="Serves a Hugging Face dir or jaxwrite checkpoint on FastAPI + uvicorn (HTTP/1.1 keep-alive, "
                    "server-sent events). Binds 127.0.0.1 unless --host is given. GET /health, /v1/models; POST "
                    "/v1/chat/completions, /v1/completions. response_format json_schema / json_object is enforced "
                    "by constrained decoding. A request whose client disconnects is cancelled: its samples stop at "
                    "the next decode chunk and its rows go to the requests behind it. Every error is a JSON body.")
    p.add_argument("--model", required=True, metavar="SPEC",
                   help="the model, run in process: a Hugging Face dir or jaxwrite checkpoint, a .gguf file, or a hub "
                        "id (ORG/NAME[@REV])")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key-env", help="environment variable holding the API key clients must send as Bearer")
    p.add_argument("--max-tokens-limit", type=int, default=16384, help="largest max_tokens a request may ask for")
    p.add_argument("--max-request-bytes", type=int, default=8 << 20, help="largest request body accepted")
    p.add_argument("--max-header-bytes", type=int, default=32 << 10, help="largest request line + headers accepted")
    p.add_argument("--max-json-depth", type=int, default=64, help="deepest nesting of a request body's JSON")
    p.add_argument("--header-timeout-s", type=float, default=30.0,
                   help="a connection must send a request's headers within this long (else 408)")
    p.add_argument("--body-timeout-s", type=float, default=30.0,
                   help="a request's body must arrive within this long (else 408)")
    p.add_argument("--keep-alive-s", type=float, default=30.0, help="how long an idle connection stays open")
    p.add_argument("--backlog", type=int, default=2048, help="listen queue of connections not yet accepted")
    p.add_argument("--schema-compile-s", type=float, default=5.0,
                   help="time budget of one JSON-schema compilation (over it: 400 schema_too_complex)")
    p.add_argument("--schema-max-states", type=int,
                   help="automaton states one schema may take (default: what 1 GiB of [states, vocab] table holds)")
    p.add_argument("--schema-cache-mb", type=int, default=2048, help="compiled-schema cache (an LRU) in MiB")
    p.add_argument("--max-batch", type=int, default=32, help="sample rows decoded together")
    p.add_argument("--model-name", help="model id reported by /v1/models (default: the directory name)")
    p.add_argument("--mesh", help="data,fsdp,tensor sizes, e.g. 1,1,-1 (default: one device)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"))
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxwrite.chat.resolve import local_model_spec
    from jaxwrite.infer import Engine, load_for_inference
    from jaxwrite.infer.server import InferenceServer
    from jaxwrite.parallel import make_mesh

    spec = local_model_spec(args.model, "--model")   # a bad --model is refused before anything loads

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InputError(f"environment variable {args.api_key_env} is not set or empty", field="--api-key-env")
    from jaxwrite.cli.generate import _mesh_shape
    for flag in ("max_tokens_limit", "max_request_bytes", "max_header_bytes", "max_json_depth", "backlog", "max_batch"):
        if getattr(args, flag) < 1:
            raise InputError(f"--{flag.replace('_', '-')}: expected a positive integer")
    if args.schema_max_states is not None and args.schema_max_states < 1:
        raise InputError("--schema-max-states: expected a positive integer")
    if args.schema_cache_mb < 0:
        raise InputError("--schema-cache-mb: expected a non-negative integer")
    for flag in ("header_timeout_s", "body_timeout_s", "keep_alive_s", "schema_compile_s"):
        if not getattr(args, flag) > 0:
            raise InputError(f"--{flag.replace('_', '-')}: expected a positive number of seconds")
    mesh = make_mesh(_mesh_shape(args.mesh)) if args.mesh else None
    model, tokenizer = load_for_inference(spec.local_path(), mesh=mesh, dtype=args.dtype)
    from jaxwrite.infer import ConstraintLimits
    limits = ConstraintLimits(max_states=args.schema_max_states, compile_s=args.schema_compile_s,
                              cache_bytes=args.schema_cache_mb << 20)
    engine = Engine(model, tokenizer, mesh=mesh, max_batch=args.max_batch, constraint_limits=limits)
    name = args.model_name or os.path.basename(os.path.normpath(args.model))
    try:
        server = InferenceServer(engine, serve_settings(args, name, api_key))
    except OSError as err:   # the port is taken, the address is not this machine's, ...
        raise InputError(f"--host {args.host} --port {args.port}: cannot listen there ({err.strerror or err})") \
            from None
    print(f"serve: {name} on http://{args.host}:{server.port}/v1"
          f"{' (API key required)' if api_key else ''}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def serve_settings(args, name: str, api_key: str | None):
    """The server's settings from the flags."""
    from jaxwrite.infer.http_app import Limits
    from jaxwrite.infer.server import ServeSettings
    limits = Limits(max_tokens=args.max_tokens_limit, max_body_bytes=args.max_request_bytes,
                    max_json_depth=args.max_json_depth, body_timeout_s=args.body_timeout_s)
    return ServeSettings(host=args.host, port=args.port, model_name=name, api_key=api_key, limits=limits,
                         backlog=args.backlog, max_header_bytes=args.max_header_bytes,
                         header_timeout_s=args.header_timeout_s, keep_alive_s=args.keep_alive_s)
