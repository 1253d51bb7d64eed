"""OpenAI-compatible response bodies: completions, stream chunks, the usage chunk, logprobs."""
from __future__ import annotations

import time
import uuid
from typing import Any, Sequence

from jaxwrite.infer.requests import Completion


def new_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class TokenText:
    """Token id -> (text, bytes) for logprobs, from the tokenizer's exact token bytes when it has them."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        exact = getattr(tokenizer, "token_bytes", lambda: None)()
        self._bytes = exact

    def __call__(self, token: int) -> tuple[str, list[int]]:
        raw = self._bytes[token] if self._bytes is not None and token < len(self._bytes) else None
        if raw is None:
            text = self._tokenizer.decode([token], skip_special_tokens=False)
            return text, list(text.encode("utf-8"))
        return raw.decode("utf-8", "replace"), list(raw)


def chat_logprobs(entries: Sequence, token_text: TokenText, top: int) -> dict:
    """{"content": [{token, logprob, bytes, top_logprobs: [...]}]} for a chat choice or chunk."""
    content = []
    for e in entries:
        text, raw = token_text(e.token)
        alts = []
        for token, logprob in e.top[:top]:
            t, b = token_text(token)
            alts.append({"token": t, "logprob": logprob, "bytes": b})
        content.append({"token": text, "logprob": e.logprob, "bytes": raw, "top_logprobs": alts})
    return {"content": content}


def text_logprobs(entries: Sequence, token_text: TokenText, top: int, offset: int = 0) -> dict:
    """The completions API's {tokens, token_logprobs, top_logprobs, text_offset}."""
    tokens, logprobs, tops, offsets = [], [], [], []
    for e in entries:
        text, _ = token_text(e.token)
        tokens.append(text)
        logprobs.append(e.logprob)
        tops.append({token_text(t)[0]: lp for t, lp in e.top[:top]})
        offsets.append(offset)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets}


def completion_body(chat: bool, model: str, completions: list[Completion], logprobs: int | None = None,
                    token_text: TokenText | None = None) -> dict:
    prompt_tokens = completions[0].prompt_tokens
    generated = sum(len(c.token_ids) for c in completions)
    choices = []
    for c in completions:
        choice: dict[str, Any] = {"index": c.sample_index, "finish_reason": str(c.finish_reason)}
        if chat:
            choice["message"] = {"role": "assistant", "content": c.text}
        else:
            choice["text"] = c.text
        if logprobs is not None:
            entries = c.logprobs or []
            choice["logprobs"] = (chat_logprobs(entries, token_text, logprobs) if chat
                                  else text_logprobs(entries, token_text, logprobs))
        choices.append(choice)
    return {"id": new_id(chat), "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": choices,
            "usage": usage(prompt_tokens, generated)}


def chunk_body(chat: bool, model: str, rid: str, index: int, text: str | None,
               finish_reason: str | None, logprobs: dict | None = None) -> dict:
    choice: dict[str, Any] = {"index": index, "finish_reason": None if finish_reason is None else str(finish_reason)}
    if chat:
        choice["delta"] = {} if text is None else {"role": "assistant", "content": text}
    else:
        choice["text"] = text or ""
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [choice]}


def usage_chunk(chat: bool, model: str, rid: str, prompt_tokens: int, completion_tokens: int) -> dict:
    """stream_options.include_usage: the last chunk, with no choices and the request's usage."""
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [],
            "usage": usage(prompt_tokens, completion_tokens)}
