"""The flags that name a model, the same for every role of every command (`jaxwrite.chat.resolve`):

  --ROLE SPEC                 an http(s):// URL, a local model directory, a .gguf file or a hub id
  --ROLE-model NAME           the model name an endpoint expects (a label for a local model);
                              the model under test (role "model") spells it --model-name
  --ROLE-api-key-env VAR      the variable holding an endpoint's key (without it no key is sent)
  --ROLE-allow-plain-http     send that key over plain http:// to another machine
  --ROLE-concurrency N        HTTP requests in flight, or a local model's batch rows
  --ROLE-mode MODE            judges only: "generate" (official) or "score_logit"
  --ROLE-price-in/-out USD    dollars per million prompt / completion tokens: the run's estimated cost
  --cache PATH / --no-cache   once per command: the judge-call cache every role's calls go through
                              (`jaxwrite.chat.cache`; default $JAXWRITE_CALL_CACHE, else
                              ~/.cache/jaxwrite/calls.sqlite)

Judge modes: "generate" samples the verdict text, as the official evaluators do, and works for every
command. "score_logit" (NON-OFFICIAL, local judges only) reads one 1-10 score from the logits after a
forced `{"score": `: only a command whose verdict is exactly that (WritingBench's critic) can use it,
and every other command refuses it up front rather than collect verdicts it cannot parse.
"""
from __future__ import annotations

from jaxwrite.common import InputError

JUDGE_MODES = ("generate", "score_logit")
# Why a command's verdicts cannot come from score_logit, for its one-line refusal.
_ONE_SCORE = "score_logit reads a single 1-10 score, not"
SPEC_HELP = ("an http(s):// OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1), a local Hugging Face dir "
             "or jaxwrite checkpoint, a .gguf file, or a Hugging Face hub id ORG/NAME[@REVISION] (run in process)")


def name_flag(role: str) -> str:
    """The flag of the name an endpoint expects: --model-name for the model under test, else --ROLE-model."""
    return "--model-name" if role == "model" else f"--{role}-model"


def _attr(role: str) -> str:
    return role.replace("-", "_")


def add_model_args(parser, role: str, what: str, *, required: bool = False, modes: tuple[str, ...] | None = None,
                   verdict: str = "this command's verdicts") -> None:
    """The role's flags. `what` says what the model does here; `modes`, for a judge, are the judge modes
    the command can use (it gets --ROLE-mode), and `verdict` names what its judge writes, for the
    refusal of the others. A `required` role is refused with one line when missing (check_model_args)."""
    attr = _attr(role)
    parser.add_argument(f"--{role}", dest=f"{attr}_spec", metavar="SPEC", help=f"{what}: {SPEC_HELP}")
    parser.add_argument(name_flag(role), dest=f"{attr}_served_name", metavar="NAME",
                        help=f"the model name the --{role} endpoint expects (a label for a local model)")
    parser.add_argument(f"--{role}-api-key-env", metavar="VAR", default=None,
                        help=f"environment variable holding the API key for a --{role} URL (never logged); "
                             "without it no key is sent")
    parser.add_argument(f"--{role}-allow-plain-http", action="store_true",
                        help="send that key even over plain http:// to a host other than this machine "
                             "(refused by default; https and 127.0.0.1/localhost need no flag)")
    parser.add_argument(f"--{role}-concurrency", type=int, default=8, metavar="N",
                        help="concurrent HTTP requests, or a local model's batch rows (default 8)")
    if modes is not None:
        if "score_logit" in modes:
            mode_help = ("'generate' samples verdicts as the official evaluators do; 'score_logit' is a "
                         f"NON-OFFICIAL fast mode for a local --{role} reading the 1-10 score distribution "
                         "from one forward pass")
        else:
            mode_help = f"only 'generate' works here ({_ONE_SCORE} {verdict})"
        parser.add_argument(f"--{role}-mode", default="generate", choices=JUDGE_MODES, help=mode_help)
    for side, tokens in (("in", "prompt"), ("out", "completion")):
        parser.add_argument(f"--{role}-price-{side}", metavar="USD", default=None,
                            help=f"dollars per million {tokens} tokens of the --{role} model: reports add the "
                                 "run's estimated cost")
    parser.set_defaults(**{f"{attr}_modes": tuple(modes or ("generate",)), f"{attr}_verdict": verdict,
                           f"{attr}_required": required})
    if parser.get_default("cache_flags") is None:   # once per command, whatever its roles
        parser.add_argument("--cache", metavar="PATH", default=None,
                            help="the judge-call cache (SQLite; shared by every command and process): a call "
                                 "asked before with the same model, messages, sampling, seed and schema is "
                                 "answered from it (default $JAXWRITE_CALL_CACHE, else "
                                 "~/.cache/jaxwrite/calls.sqlite)")
        parser.add_argument("--no-cache", action="store_true", help="ask the model every time; store nothing")
        parser.set_defaults(cache_flags=True)


def has_model(args, role: str) -> bool:
    """Whether any of the role's flags asks for a model (a name or a mode without the SPEC is refused)."""
    attr = _attr(role)
    return bool(getattr(args, f"{attr}_spec") or getattr(args, f"{attr}_served_name")
                or getattr(args, f"{attr}_mode", "generate") != "generate")


def check_model_args(args, role: str):
    """The role's `ModelSpec` (None for an optional role not given), or a one-line InputError for an
    incomplete or conflicting set of flags or a mode this command or transport cannot use. Cheap: loads
    and downloads nothing, so a command calls it before reading its data."""
    from jaxwrite.chat.resolve import FORMS, check_endpoint, model_spec
    attr = _attr(role)
    spec = getattr(args, f"{attr}_spec")
    mode = getattr(args, f"{attr}_mode", "generate")
    if getattr(args, f"{attr}_concurrency") < 1:
        raise InputError(f"--{role}-concurrency: expected a positive integer")
    _prices(args, role)
    call_cache(args)
    modes = getattr(args, f"{attr}_modes")
    if mode not in modes:
        raise InputError(f"--{role}-mode {mode}: not usable here ({_ONE_SCORE} {getattr(args, f'{attr}_verdict')}); "
                         f"modes that work: {', '.join(modes)}")
    if not spec:
        if getattr(args, f"{attr}_required") or has_model(args, role):
            raise InputError(f"expected --{role} SPEC: {FORMS}")
        return None
    found = model_spec(spec, f"--{role}")
    if found.is_url:
        if mode != "generate":
            raise InputError(f"--{role}-mode {mode}: needs a local model (a directory, a .gguf file or a hub id); "
                             f"an endpoint returns text, not logits; use --{role}-mode generate with a URL")
        check_endpoint(found, getattr(args, f"{attr}_served_name"), name_flag(role),
                       getattr(args, f"{attr}_api_key_env"), getattr(args, f"{attr}_allow_plain_http"))
    return found


def model_from_args(args, role: str):
    """The chat model the role's flags name (None for an optional role not given); InputError as
    `check_model_args`. A judge role's local model is a `LocalJudge` in its --ROLE-mode."""
    from jaxwrite.chat.resolve import open_chat_model
    found = check_model_args(args, role)
    if found is None:
        return None
    attr = _attr(role)
    local = None
    if hasattr(args, f"{attr}_mode"):
        import functools

        from jaxwrite.evals import LocalJudge   # the local chat model, plus the score_logit judge mode
        local = functools.partial(LocalJudge, mode=getattr(args, f"{attr}_mode"))
    from jaxwrite.chat import MeteredChatModel
    model = open_chat_model(found, name=getattr(args, f"{attr}_served_name"), name_flag=name_flag(role),
                            api_key_env=getattr(args, f"{attr}_api_key_env"),
                            allow_plain_http=getattr(args, f"{attr}_allow_plain_http"),
                            concurrency=getattr(args, f"{attr}_concurrency"),
                            **({"local": local} if local is not None else {}))
    return MeteredChatModel(model, cache=call_cache(args), prices=_prices(args, role))


def _prices(args, role: str):
    """The role's `Prices` (None without --ROLE-price-in/-out); one line for a bad price."""
    from jaxwrite.chat import parse_price, prices_from
    attr = _attr(role)
    return prices_from(parse_price(getattr(args, f"{attr}_price_in", None), f"--{role}-price-in"),
                       parse_price(getattr(args, f"{attr}_price_out", None), f"--{role}-price-out"))


def call_cache(args):
    """The command's `CallCache` (opened once, shared by its roles), or None with --no-cache; a file that is
    not a jaxwrite cache is one line naming it."""
    if not getattr(args, "cache_flags", False):
        return None
    if args.no_cache:
        if args.cache:
            raise InputError(f"--cache {args.cache} and --no-cache: expected one of the two")
        return None
    if getattr(args, "_call_cache", None) is None:
        from jaxwrite.chat import CallCache, default_cache_path
        args._call_cache = CallCache(args.cache or default_cache_path())
    return args._call_cache
