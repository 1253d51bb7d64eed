"""Shared options for commands that call a model or a judge: an OpenAI-compatible URL, or a local
model directory served in process by jaxwrite's engine. Either way the result is a `jaxwrite.chat`
chat model with one interface (`label`, `concurrency`, `chat`)."""
from __future__ import annotations

from jaxwrite.common import InputError


def add_judge_args(parser, role: str = "judge") -> None:
    """--{role}-url + --{role}-model (HTTP), or --{role}-model-dir (local engine); the model under test
    (role "model") names its served model with --model-name."""
    name_flag = "--model-name" if role == "model" else f"--{role}-model"
    attr = role.replace("-", "_")
    parser.add_argument(f"--{role}-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument(name_flag, dest=f"{attr}_served_name", help="model name the server expects")
    parser.add_argument(f"--{role}-model-dir", help="local Hugging Face dir or jaxwrite checkpoint, run in "
                                                  "process by jaxwrite's engine (instead of a URL)")
    parser.add_argument(f"--{role}-mode", default="generate", choices=["generate", "score_logit"],
                        help="local judges only: 'generate' samples verdicts as the official evaluators do; "
                             "'score_logit' is a NON-OFFICIAL fast mode reading the score distribution "
                             "from one forward pass")
    parser.add_argument(f"--{role}-api-key-env", default="OPENAI_API_KEY",
                        help="environment variable holding the API key (never logged)")
    parser.add_argument(f"--{role}-concurrency", type=int, default=8,
                        help="concurrent HTTP requests, or the local engine's batch size")


def has_judge(args, role: str = "judge") -> bool:
    attr = role.replace("-", "_")
    return bool(getattr(args, f"{attr}_url") or getattr(args, f"{attr}_model_dir"))


def judge_from_args(args, role: str = "judge"):
    """The chat model the options describe (raises InputError for an incomplete or conflicting set)."""
    attr = role.replace("-", "_")
    url, name = getattr(args, f"{attr}_url"), getattr(args, f"{attr}_served_name")
    model_dir = getattr(args, f"{attr}_model_dir")
    concurrency = getattr(args, f"{attr}_concurrency")
    name_flag = "--model-name" if role == "model" else f"--{role}-model"
    if concurrency < 1:
        raise InputError(f"--{role}-concurrency: expected a positive integer")
    if url and model_dir:
        raise InputError(f"--{role}-url and --{role}-model-dir: expected one of them, not both")
    if model_dir:
        from jaxwrite.evals import LocalJudge  # the local chat model, plus the score_logit judge mode
        return LocalJudge(model=model_dir, mode=getattr(args, f"{attr}_mode"), max_batch=concurrency)
    if not url:
        raise InputError(f"expected --{role}-url (with {name_flag}) or --{role}-model-dir")
    if not name:
        raise InputError(f"{name_flag}: expected a model name for --{role}-url")
    from jaxwrite.chat import HttpChatModel
    return HttpChatModel(url, name, api_key_env=getattr(args, f"{attr}_api_key_env"), concurrency=concurrency)
