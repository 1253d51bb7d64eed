"""OpenAI-compatible request parsing and response bodies (chat completions and completions).

Fields read: messages / prompt (text or token ids), max_tokens (or max_completion_tokens),
temperature, top_p, top_k (an extension, as vLLM accepts), n, stop, seed, stream,
response_format {"type": "text"} or {"type": "json_schema", "json_schema": {"schema": {...}}}.
Unknown fields are ignored, as OpenAI-compatible servers commonly do.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from jaxwrite.infer.engine import Completion, GenerationRequest
from jaxwrite.infer.sampling import SamplingParams


class ApiError(Exception):
    """An error answered as HTTP `status` with body {"error": {"message", "type", "code"}}."""

    def __init__(self, status: int, message: str, code: str = "invalid_request", kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.code, self.kind = status, message, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "code": self.code}}


def _field(body: dict, name: str, types, default):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ApiError(400, f"field '{name}': expected {_names(types)}, got a boolean", "invalid_value")
    if not isinstance(value, types):
        raise ApiError(400, f"field '{name}': expected {_names(types)}, got {type(value).__name__}", "invalid_type")
    return value


def _names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({int: "an integer", float: "a number", str: "a string", list: "a list",
                        dict: "an object", bool: "a boolean"}.get(t, t.__name__) for t in types)


def parse_request(body: Any, tokenizer, chat: bool, max_tokens_limit: int) -> tuple[GenerationRequest, bool]:
    """(GenerationRequest, stream) from a JSON body; ApiError(400) naming the field on bad input."""
    if not isinstance(body, dict):
        raise ApiError(400, "request body: expected a JSON object", "invalid_json")
    prompt_ids = _chat_prompt(body, tokenizer) if chat else _text_prompt(body, tokenizer)
    max_tokens = _field(body, "max_tokens", int, None)
    if max_tokens is None:
        max_tokens = _field(body, "max_completion_tokens", int, max_tokens_limit)
    if max_tokens > max_tokens_limit:
        raise ApiError(400, f"field 'max_tokens': {max_tokens} exceeds this server's limit of {max_tokens_limit}",
                       "max_tokens_too_large")
    stop = _field(body, "stop", (str, list), [])
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) for s in stop):
        raise ApiError(400, "field 'stop': expected a string or a list of strings", "invalid_type")
    params = SamplingParams(
        temperature=float(_field(body, "temperature", (int, float), 1.0)),
        top_p=float(_field(body, "top_p", (int, float), 1.0)),
        top_k=_field(body, "top_k", int, None),
        max_new_tokens=max_tokens, seed=_field(body, "seed", int, None), n=_field(body, "n", int, 1),
        stop=tuple(stop))
    try:
        params.validate()
    except ValueError as err:
        raise ApiError(400, str(err), "invalid_value") from None
    stream = _field(body, "stream", bool, False)
    return GenerationRequest(prompt_ids, params, _schema(body)), stream


def _chat_prompt(body: dict, tokenizer) -> list[int]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "field 'messages': expected a non-empty list of {role, content} objects", "invalid_messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ApiError(400, f"field 'messages[{i}]': expected {{\"role\": str, \"content\": str}}",
                           "invalid_messages")
    try:
        return tokenizer.encode_chat([{"role": m["role"], "content": m["content"]} for m in messages])
    except Exception as err:   # template errors (e.g. role order) are the caller's input
        raise ApiError(400, f"field 'messages': chat template failed: {err}", "invalid_messages") from None


def _text_prompt(body: dict, tokenizer) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return tokenizer.encode(prompt)
    if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    raise ApiError(400, "field 'prompt': expected a string or a list of token ids (one prompt per request)",
                   "invalid_prompt")


def _schema(body: dict) -> dict | None:
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_schema"):
        raise ApiError(400, "field 'response_format': expected {\"type\": \"text\"} or "
                            "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": {...}}}", "invalid_response_format")
    if fmt["type"] == "text":
        return None
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise ApiError(400, "field 'response_format.json_schema.schema': expected a JSON schema object",
                       "invalid_response_format")
    return schema


def completion_body(chat: bool, model: str, completions: list[Completion]) -> dict:
    prompt_tokens = completions[0].prompt_tokens
    generated = sum(len(c.token_ids) for c in completions)
    choices = []
    for c in completions:
        choice: dict[str, Any] = {"index": c.sample_index, "finish_reason": c.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": c.text}
        else:
            choice["text"] = c.text
        choices.append(choice)
    return {"id": new_id(chat), "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": generated,
                      "total_tokens": prompt_tokens + generated}}


def chunk_body(chat: bool, model: str, rid: str, index: int, text: str | None,
               finish_reason: str | None) -> dict:
    choice: dict[str, Any] = {"index": index, "finish_reason": finish_reason}
    if chat:
        choice["delta"] = {} if text is None else {"role": "assistant", "content": text}
    else:
        choice["text"] = text or ""
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [choice]}


def new_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
