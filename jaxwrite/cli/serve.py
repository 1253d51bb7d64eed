"""`jaxwrite serve --model DIR`: an OpenAI-compatible HTTP server over the inference engine."""
from __future__ import annotations

import os
import sys

from jaxwrite.common import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="OpenAI-compatible server (/v1/models, /v1/chat/completions, /v1/completions)",
        description="Serves a Hugging Face dir or jaxwrite checkpoint. Binds 127.0.0.1 unless --host is given. "
                    "response_format json_schema is enforced by constrained decoding.")
    p.add_argument("--model", required=True, help="Hugging Face dir or jaxwrite checkpoint")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key-env", help="environment variable holding the API key clients must send as Bearer")
    p.add_argument("--max-tokens-limit", type=int, default=16384, help="largest max_tokens a request may ask for")
    p.add_argument("--max-request-bytes", type=int, default=8 << 20, help="largest request body accepted")
    p.add_argument("--max-batch", type=int, default=32, help="sample rows decoded together")
    p.add_argument("--model-name", help="model id reported by /v1/models (default: the directory name)")
    p.add_argument("--mesh", help="data,fsdp,tensor sizes, e.g. 1,1,-1 (default: one device)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"))
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxwrite.infer import Engine, load_for_inference
    from jaxwrite.infer.server import InferenceServer
    from jaxwrite.parallel import make_mesh

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InputError(f"environment variable {args.api_key_env} is not set or empty", field="--api-key-env")
    mesh = make_mesh(tuple(int(x) for x in args.mesh.split(","))) if args.mesh else None
    model, tokenizer = load_for_inference(args.model, mesh=mesh, dtype=args.dtype)
    engine = Engine(model, tokenizer, mesh=mesh, max_batch=args.max_batch)
    name = args.model_name or os.path.basename(os.path.normpath(args.model))
    server = InferenceServer(engine, args.host, args.port, name, api_key=api_key,
                             max_tokens_limit=args.max_tokens_limit, max_request_bytes=args.max_request_bytes)
    print(f"serve: {name} on http://{args.host}:{server.port}/v1"
          f"{' (API key required)' if api_key else ''}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
