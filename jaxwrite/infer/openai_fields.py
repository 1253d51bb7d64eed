"""Which request fields the OpenAI-compatible server takes: every field is honoured or refused, none is
dropped. `check_fields` refuses (400 naming it) a field outside the endpoint's allow-list, a known field
this server does not implement unless it has its neutral value (what leaving it out means), and any
string that is not valid Unicode (a lone surrogate), before anything reads or echoes the body.
"""
from __future__ import annotations

from typing import Any

# Honoured, by endpoint (chat: True). openai_api.parse_request reads each of these.
_SHARED = frozenset({
    "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "seed", "stream",
    "stream_options", "response_format", "logprobs", "user",
    # vLLM's extensions (as vLLM defines them; top_k -1 is off, as there)
    "top_k", "min_p", "repetition_penalty", "min_tokens", "stop_token_ids", "ignore_eos", "guided_json"})
HONOURED = {True: _SHARED | {"messages", "top_logprobs"}, False: _SHARED | {"prompt"}}

# Known fields this server does not implement: accepted only at a neutral value (the first is null).
NEUTRAL: dict[str, tuple] = {
    # OpenAI's
    "tools": (None, []), "tool_choice": (None, "none"), "functions": (None, []), "function_call": (None, "none"),
    "parallel_tool_calls": (None, True, False), "logit_bias": (None, {}), "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0), "echo": (None, False), "suffix": (None, ""), "best_of": (None, 1),
    "prediction": (None,), "audio": (None,), "modalities": (None, ["text"]), "store": (None, False),
    "metadata": (None, {}), "service_tier": (None, "auto", "default"), "reasoning_effort": (None,),
    "web_search_options": (None,),
    # vLLM's
    "use_beam_search": (None, False), "length_penalty": (None, 1), "guided_regex": (None,),
    "guided_choice": (None,), "guided_grammar": (None,), "guided_decoding_backend": (None,),
    "guided_whitespace_pattern": (None,), "structured_outputs": (None,), "bad_words": (None, []),
    "allowed_token_ids": (None,), "prompt_logprobs": (None,), "truncate_prompt_tokens": (None,),
    "include_stop_str_in_output": (None, False), "skip_special_tokens": (None, True),
    "spaces_between_special_tokens": (None, True), "add_generation_prompt": (None, True),
    "continue_final_message": (None, False), "chat_template": (None,), "chat_template_kwargs": (None, {}),
    "logits_processors": (None,), "return_tokens_as_token_ids": (None, False), "priority": (None, 0),
}

# Keys of the nested objects, each honoured (anything else there is refused unless null).
MESSAGE_KEYS = frozenset({"role", "content"})
PART_KEYS = frozenset({"type", "text"})
STREAM_OPTION_KEYS = frozenset({"include_usage"})
FORMAT_KEYS = frozenset({"type", "json_schema"})
SCHEMA_SPEC_KEYS = frozenset({"name", "description", "schema", "strict"})


def safe_text(text: str) -> str:
    """`text` with anything UTF-8 cannot carry (lone surrogates) written as backslash escapes: what an
    error message may echo."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def is_neutral(value: Any, allowed: tuple) -> bool:
    """Whether value is one of `allowed`, by type too (false is not 0; 0 and 0.0 are one number)."""
    for a in allowed:
        if isinstance(value, bool) or isinstance(a, bool):
            if value is a:
                return True
        elif isinstance(value, (int, float)) and isinstance(a, (int, float)):
            if value == a:
                return True
        elif type(value) is type(a) and value == a or value is a:
            return True
    return False


def check_fields(body: dict, chat: bool, error) -> None:
    """Raises error(message, code) for a string that is not valid Unicode anywhere in the body, then for a
    top-level field the endpoint does not honour (unknown, or known and not at its neutral value)."""
    bad = _surrogate_path(body)
    if bad is not None:
        raise error(f"field '{bad}': not valid Unicode (a lone surrogate escape such as \\ud800); send text "
                    f"as UTF-8", "invalid_unicode")
    for name, value in body.items():
        if name in HONOURED[chat]:
            continue
        if name in NEUTRAL:
            if not is_neutral(value, NEUTRAL[name]):
                raise error(f"field '{name}': not supported by this server (only its default is accepted)",
                            "unsupported_field")
            continue
        other = HONOURED[not chat] - HONOURED[chat]
        where = f"; it belongs to {'/v1/completions' if chat else '/v1/chat/completions'}" if name in other else ""
        raise error(f"field '{safe_text(name)}': not a field this server knows{where} (every field is honoured "
                    f"or refused, none is ignored)", "unknown_field")


def check_keys(obj: dict, keys: frozenset, where: str, error, code: str) -> None:
    """Refuses a key of a nested object outside `keys` unless its value is null."""
    for key, value in obj.items():
        if key not in keys and value is not None:
            raise error(f"field '{where}.{safe_text(key)}': not supported by this server (expected only "
                        f"{', '.join(sorted(keys))})", code)


def _surrogate_path(body: Any) -> str | None:
    """The path of the first string (key or value) holding a lone surrogate, else None (iterative)."""
    stack = [(body, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return path or "body"
        elif isinstance(item, dict):
            for key, value in item.items():
                sub = f"{path}.{safe_text(key)}" if path else safe_text(key)
                if not _encodable(key):
                    return sub
                stack.append((value, sub))
        elif isinstance(item, list):
            stack.extend((value, f"{path}[{i}]") for i, value in enumerate(item))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
