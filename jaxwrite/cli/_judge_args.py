"""Shared options for commands that call a model or a judge: an OpenAI-compatible URL, or a local
model directory served in process by jaxwrite's engine. Either way the result is a `jaxwrite.chat`
chat model with one interface (`label`, `concurrency`, `describe`, `chat`).

Judge modes: "generate" samples the verdict text, as the official evaluators do, and works for every
command. "score_logit" (NON-OFFICIAL, local judges only) reads one 1-10 score from the logits after a
forced `{"score": `: only a command whose verdict is exactly that (WritingBench's critic) can use it,
and every other command refuses it up front rather than collect verdicts it cannot parse.
"""
from __future__ import annotations

import os

from jaxwrite.common import InputError

JUDGE_MODES = ("generate", "score_logit")
# Why a command's verdicts cannot come from score_logit, for its one-line refusal.
_ONE_SCORE = "score_logit reads a single 1-10 score, not"


def add_judge_args(parser, role: str = "judge", modes: tuple[str, ...] = ("generate",),
                   verdict: str = "this command's verdicts") -> None:
    """--{role}-url + --{role}-model (HTTP), or --{role}-model-dir (local engine); the model under test
    (role "model") names its served model with --model-name. `modes` are the judge modes the command
    can use; `verdict` names what its judge writes, for the refusal of the others. The model under
    test always generates, so it gets no --model-mode flag."""
    name_flag = "--model-name" if role == "model" else f"--{role}-model"
    attr = role.replace("-", "_")
    parser.add_argument(f"--{role}-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument(name_flag, dest=f"{attr}_served_name", help="model name the server expects")
    parser.add_argument(f"--{role}-model-dir", help="local Hugging Face dir or jaxwrite checkpoint, run in "
                                                  "process by jaxwrite's engine (instead of a URL)")
    if role != "model":
        _add_mode_arg(parser, role, modes, verdict)
    add_key_args(parser, f"--{role}", f"--{role}-url")
    parser.add_argument(f"--{role}-concurrency", type=int, default=8,
                        help="concurrent HTTP requests, or the local engine's batch size")
    parser.set_defaults(**{f"{attr}_modes": tuple(modes), f"{attr}_verdict": verdict})


def _add_mode_arg(parser, role: str, modes: tuple[str, ...], verdict: str) -> None:
    if "score_logit" in modes:
        mode_help = ("'generate' samples verdicts as the official evaluators do; 'score_logit' is a "
                     "NON-OFFICIAL fast mode for a local judge (--%s-model-dir) reading the 1-10 score "
                     "distribution from one forward pass" % role)
    else:
        mode_help = f"only 'generate' works here ({_ONE_SCORE} {verdict})"
    parser.add_argument(f"--{role}-mode", default="generate", choices=JUDGE_MODES, help=mode_help)


def add_key_args(parser, prefix: str, url_flag: str) -> None:
    """`{prefix}-api-key-env VAR` and `{prefix}-allow-plain-http`: no key is sent unless VAR is named, and
    never over plain http to another machine unless the second flag says so."""
    parser.add_argument(f"{prefix}-api-key-env", metavar="VAR", default=None,
                        help=f"environment variable holding the API key for {url_flag} (never logged); "
                             "without it no key is sent")
    parser.add_argument(f"{prefix}-allow-plain-http", action="store_true",
                        help="send that key even over plain http:// to a host other than this machine "
                             "(refused by default; https and 127.0.0.1/localhost need no flag)")


def http_model(args, url: str, name: str, prefix: str, concurrency: int):
    """The HTTP chat model for `url`, its key source and plain-http permission read from the
    `{prefix}-api-key-env` / `{prefix}-allow-plain-http` options (InputError for a refused key)."""
    from jaxwrite.chat import HttpChatModel
    from jaxwrite.chat.http_model import check_key_destination
    attr = prefix.lstrip("-").replace("-", "_")
    key_env = getattr(args, f"{attr}_api_key_env")
    allow = getattr(args, f"{attr}_allow_plain_http")
    check_key_destination(url, key_env, allow, (f"{prefix}-api-key-env", f"{prefix}-allow-plain-http"))
    if key_env and not os.environ.get(key_env):
        raise InputError(f"{prefix}-api-key-env {key_env}: the environment variable is not set or empty")
    return HttpChatModel(url, name, api_key_env=key_env, concurrency=concurrency, allow_plain_http=allow)


def has_judge(args, role: str = "judge") -> bool:
    attr = role.replace("-", "_")
    return bool(getattr(args, f"{attr}_url") or getattr(args, f"{attr}_model_dir"))


def check_judge_args(args, role: str = "judge") -> None:
    """Raises InputError for an incomplete or conflicting set of options, or a mode this command or
    transport cannot use; cheap (loads nothing), so a command can call it before reading its data."""
    attr = role.replace("-", "_")
    url, name = getattr(args, f"{attr}_url"), getattr(args, f"{attr}_served_name")
    model_dir = getattr(args, f"{attr}_model_dir")
    concurrency = getattr(args, f"{attr}_concurrency")
    mode = getattr(args, f"{attr}_mode", "generate")   # the model under test has no mode flag
    name_flag = "--model-name" if role == "model" else f"--{role}-model"
    if concurrency < 1:
        raise InputError(f"--{role}-concurrency: expected a positive integer")
    if url and model_dir:
        raise InputError(f"--{role}-url and --{role}-model-dir: expected one of them, not both")
    modes = getattr(args, f"{attr}_modes", ("generate",))
    if mode not in modes:
        raise InputError(f"--{role}-mode {mode}: not usable here ({_ONE_SCORE} "
                         f"{getattr(args, f'{attr}_verdict', 'these verdicts')}); modes that work: "
                         f"{', '.join(modes)}")
    if mode != "generate" and url:
        raise InputError(f"--{role}-mode {mode}: needs a local judge (--{role}-model-dir); an HTTP judge "
                         f"returns text, not logits; use --{role}-mode generate with --{role}-url")
    if not (url or model_dir):
        raise InputError(f"expected --{role}-url (with {name_flag}) or --{role}-model-dir")
    if url and not name:
        raise InputError(f"{name_flag}: expected a model name for --{role}-url")
    if url:
        from jaxwrite.chat.http_model import check_key_destination
        check_key_destination(url, getattr(args, f"{attr}_api_key_env"), getattr(args, f"{attr}_allow_plain_http"),
                              (f"--{role}-api-key-env", f"--{role}-allow-plain-http"))


def judge_from_args(args, role: str = "judge"):
    """The chat model the options describe (raises InputError as `check_judge_args` does)."""
    check_judge_args(args, role)
    attr = role.replace("-", "_")
    url, model_dir = getattr(args, f"{attr}_url"), getattr(args, f"{attr}_model_dir")
    concurrency = getattr(args, f"{attr}_concurrency")
    if model_dir:
        from jaxwrite.evals import LocalJudge  # the local chat model, plus the score_logit judge mode
        return LocalJudge(model=model_dir, mode=getattr(args, f"{attr}_mode", "generate"), max_batch=concurrency)
    return http_model(args, url, getattr(args, f"{attr}_served_name"), f"--{role}", concurrency)
