"""OpenAI-compatible request parsing (chat completions and completions).

Every field is honoured or refused with 400 naming it; none is silently dropped (the allow-list and
the known-but-unimplemented fields: openai_fields.py). Honoured: model (must name the served model
when given; else 404), messages (roles system, developer (read as system), user, assistant; content a
string or an array of text parts) / prompt (text or token ids), max_tokens (or max_completion_tokens),
temperature, top_p, n, stop, seed, stream, stream_options.include_usage, logprobs / top_logprobs,
response_format {"type": "text" | "json_object" | "json_schema"}, user (a label, as in OpenAI's API:
it never changes the output); and vLLM's extensions top_k (-1 or 0: off), min_p, repetition_penalty,
min_tokens, stop_token_ids, ignore_eos, guided_json (a JSON schema: the same as response_format
json_schema). Known fields that would change the output and are not implemented (tools, logit_bias,
penalties other than repetition, echo, suffix, best_of, beam search, guided_regex, ...) are accepted
only at their neutral value. Error messages name the field as the request did (`max_tokens`) and never
echo text UTF-8 cannot carry. Response bodies are built in openai_bodies.py.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from jaxwrite.infer.openai_fields import (FORMAT_KEYS, MESSAGE_KEYS, PART_KEYS, SCHEMA_SPEC_KEYS,
                                          STREAM_OPTION_KEYS, check_fields, check_keys, safe_text)
from jaxwrite.infer.requests import GenerationRequest
from jaxwrite.infer.sampling import SamplingParams

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_TOP_LOGPROBS = 20          # chat's top_logprobs range (OpenAI's)
MAX_COMPLETION_LOGPROBS = 5    # completions' logprobs range (OpenAI's)
JSON_OBJECT = "json_object"    # GenerationRequest.json_schema value asking for any JSON object


class ApiError(Exception):
    """An error answered as HTTP `status` with body {"error": {"message", "type", "code"}}."""

    def __init__(self, status: int, message: str, code: str = "invalid_request", kind: str = "invalid_request_error"):
        message = safe_text(message)   # a message must always encode (no lone surrogates from the input)
        super().__init__(message)
        self.status, self.message, self.code, self.kind = status, message, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "code": self.code}}


@dataclasses.dataclass
class ParsedRequest:
    """What a request body asks for: the engine request plus how to answer it."""
    request: GenerationRequest
    stream: bool = False
    include_usage: bool = False      # stream_options.include_usage: a last chunk with the usage
    logprobs: int | None = None      # None: no logprobs; k: the sampled token's and the top k


def _field(body: dict, name: str, types, default):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ApiError(400, f"field '{name}': expected {_names(types)}, got a boolean", "invalid_value")
    if not isinstance(value, types):
        raise ApiError(400, f"field '{name}': expected {_names(types)}, got {type(value).__name__}", "invalid_type")
    return value


def _number(body: dict, name: str, default: float) -> float:
    value = _field(body, name, (int, float), default)
    try:
        return float(value)
    except OverflowError:   # an integer past float range (1e400 parses as inf, refused by validate)
        raise ApiError(400, f"field '{name}': a number out of range (expected a float)", "invalid_value") from None


def _names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({int: "an integer", float: "a number", str: "a string", list: "a list",
                        dict: "an object", bool: "a boolean"}.get(t, t.__name__) for t in types)


def parse_request(body: Any, tokenizer, chat: bool, max_tokens_limit: int, model_name: str | None = None
                  ) -> ParsedRequest:
    """The request a JSON body asks for; ApiError (400, or 404 for another model) naming the field."""
    if not isinstance(body, dict):
        raise ApiError(400, "request body: expected a JSON object", "invalid_json")
    check_fields(body, chat, lambda message, code: ApiError(400, message, code))
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "field 'model': expected a string", "invalid_type")
    if model is not None and model_name is not None and model != model_name:
        raise ApiError(404, f"field 'model': the model '{model}' does not exist here; this server serves "
                            f"'{model_name}' (GET /v1/models)", "model_not_found")
    _field(body, "user", str, None)
    prompt_ids = _chat_prompt(body, tokenizer) if chat else _text_prompt(body, tokenizer)
    budget_name = "max_tokens" if body.get("max_tokens") is not None or body.get("max_completion_tokens") is None \
        else "max_completion_tokens"
    max_tokens = _field(body, budget_name, int, max_tokens_limit)
    if max_tokens > max_tokens_limit:
        raise ApiError(400, f"field '{budget_name}': {max_tokens} exceeds this server's limit of {max_tokens_limit}",
                       "max_tokens_too_large")
    stop = _field(body, "stop", (str, list), [])
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) for s in stop):
        raise ApiError(400, "field 'stop': expected a string or a list of strings", "invalid_type")
    stop_ids = _field(body, "stop_token_ids", list, [])
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in stop_ids):
        raise ApiError(400, "field 'stop_token_ids': expected a list of token ids (integers)", "invalid_type")
    top_k = _field(body, "top_k", int, None)
    params = SamplingParams(
        temperature=_number(body, "temperature", 1.0), top_p=_number(body, "top_p", 1.0),
        top_k=None if top_k == -1 else top_k,    # vLLM's "off"
        max_new_tokens=max_tokens, seed=_field(body, "seed", int, None), n=_field(body, "n", int, 1),
        stop=tuple(stop), min_p=_number(body, "min_p", 0.0),
        repetition_penalty=_number(body, "repetition_penalty", 1.0), min_tokens=_field(body, "min_tokens", int, 0),
        stop_token_ids=tuple(stop_ids), ignore_eos=_field(body, "ignore_eos", bool, False))
    try:
        params.validate(names={"max_new_tokens": budget_name})
    except ValueError as err:
        raise ApiError(400, str(err), "invalid_value") from None
    stream = _field(body, "stream", bool, False)
    options = _field(body, "stream_options", dict, None)
    if options is not None and not stream:
        raise ApiError(400, "field 'stream_options': only allowed when 'stream' is true", "invalid_value")
    check_keys(options or {}, STREAM_OPTION_KEYS, "stream_options", _invalid, "unsupported_field")
    include_usage = _field(options or {}, "include_usage", bool, False)
    logprobs = _logprobs(body, chat)
    schema = _schema(body)
    if schema is not None and (params.min_tokens or params.ignore_eos):
        # A finished schema allows only EOS: holding it back would leave nothing to sample.
        name = "min_tokens" if params.min_tokens else "ignore_eos"
        raise ApiError(400, f"field '{name}': not supported together with a JSON schema", "invalid_value")
    return ParsedRequest(GenerationRequest(prompt_ids, params, schema, logprobs), stream, include_usage, logprobs)


def _invalid(message: str, code: str) -> ApiError:
    return ApiError(400, message, code)


def _logprobs(body: dict, chat: bool) -> int | None:
    if chat:
        wanted = _field(body, "logprobs", bool, False)
        top = _field(body, "top_logprobs", int, None)
        if top is not None and not wanted:
            raise ApiError(400, "field 'top_logprobs': needs 'logprobs': true", "invalid_value")
        if top is not None and not 0 <= top <= MAX_TOP_LOGPROBS:
            raise ApiError(400, f"field 'top_logprobs': expected an integer in [0, {MAX_TOP_LOGPROBS}]",
                           "invalid_value")
        return (top or 0) if wanted else None
    top = _field(body, "logprobs", int, None)
    if top is not None and not 0 <= top <= MAX_COMPLETION_LOGPROBS:
        raise ApiError(400, f"field 'logprobs': expected an integer in [0, {MAX_COMPLETION_LOGPROBS}]", "invalid_value")
    return top


def _content(content: Any, where: str) -> str:
    """A message's text: a string, or an array of {"type": "text", "text": str} parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text":
                what = f"type {kind!r}" if isinstance(kind, str) else "not a {type, text} object"
                raise ApiError(400, f"field '{where}.content[{j}]': {what}; only text parts are supported",
                               "invalid_messages")
            if not isinstance(part.get("text"), str):
                raise ApiError(400, f"field '{where}.content[{j}].text': expected a string", "invalid_messages")
            check_keys(part, PART_KEYS, f"{where}.content[{j}]", _invalid, "invalid_messages")
            texts.append(part["text"])
        return "\n".join(texts)
    raise ApiError(400, f"field '{where}.content': expected a string or a non-empty array of text parts",
                   "invalid_messages")


def _chat_prompt(body: dict, tokenizer) -> list[int]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "field 'messages': expected a non-empty list of {role, content} objects",
                       "invalid_messages")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(400, f"field 'messages[{i}]': expected {{\"role\": str, \"content\": ...}}",
                           "invalid_messages")
        role = ROLES.get(m["role"])
        if role is None:
            raise ApiError(400, f"field 'messages[{i}].role': {m['role']!r} is not supported; expected one of "
                                f"{', '.join(ROLES)}", "invalid_messages")
        check_keys(m, MESSAGE_KEYS, f"messages[{i}]", _invalid, "invalid_messages")
        turns.append({"role": role, "content": _content(m.get("content"), f"messages[{i}]")})
    try:
        return tokenizer.encode_chat(turns)
    except Exception as err:   # template errors (e.g. role order) are the caller's input
        raise ApiError(400, f"field 'messages': chat template failed: {err}", "invalid_messages") from None


def _text_prompt(body: dict, tokenizer) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        try:
            return tokenizer.encode(prompt)
        except Exception as err:   # text the tokenizer cannot take is the caller's input
            raise ApiError(400, f"field 'prompt': could not be tokenised ({type(err).__name__}: {err})",
                           "invalid_prompt") from None
    if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    raise ApiError(400, "field 'prompt': expected a string or a list of token ids (one prompt per request)",
                   "invalid_prompt")


def _schema(body: dict) -> dict | str | None:
    """The output's JSON schema from response_format, or from vLLM's guided_json (the same thing)."""
    fmt, guided = body.get("response_format"), body.get("guided_json")
    if guided is not None:
        if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
            raise ApiError(400, "field 'guided_json': give the schema once (guided_json or response_format)",
                           "invalid_response_format")
        if isinstance(guided, str):   # vLLM takes the schema as JSON text too
            try:
                guided = json.loads(guided)
            except ValueError as err:
                raise ApiError(400, f"field 'guided_json': not valid JSON ({err})", "invalid_response_format") \
                    from None
        if not isinstance(guided, dict):
            raise ApiError(400, "field 'guided_json': expected a JSON schema object (or its JSON text)",
                           "invalid_response_format")
        return guided
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise ApiError(400, "field 'response_format': expected {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                            "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": {...}}}",
                       "invalid_response_format")
    check_keys(fmt, FORMAT_KEYS, "response_format", _invalid, "invalid_response_format")
    if fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return JSON_OBJECT
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise ApiError(400, "field 'response_format.json_schema.schema': expected a JSON schema object",
                       "invalid_response_format")
    check_keys(spec, SCHEMA_SPEC_KEYS, "response_format.json_schema", _invalid, "invalid_response_format")
    return schema
