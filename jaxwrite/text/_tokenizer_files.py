"""Reads what a tokenizer directory says besides the vocabulary: named special tokens, the EOS set
from generation_config.json / config.json, and the chat template. Hugging Face file conventions."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from jaxwrite.common.errors import InputError

TOKENIZER_CONFIG = "tokenizer_config.json"
GENERATION_CONFIG = "generation_config.json"
MODEL_CONFIG = "config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"

# The named special tokens transformers hands to chat templates (its SPECIAL_TOKENS_ATTRIBUTES).
NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


@dataclasses.dataclass(frozen=True)
class TokenizerFiles:
    """Settings read from the JSON/Jinja files beside a tokenizer model."""

    directory: str
    special_tokens: dict[str, str]           # e.g. {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    extra_special_tokens: tuple[str, ...]    # additional_special_tokens / extra_special_tokens
    generation_eos_ids: tuple[int, ...]      # generation_config.json eos_token_id (else config.json's)
    generation_pad_id: int | None
    chat_template: str | None
    clean_up_tokenization_spaces: bool

    def where(self, name: str) -> str:
        return os.path.join(self.directory, name)


def read_json_object(path: str) -> dict | None:
    """The JSON object in `path`, None when the file does not exist, InputError when it is broken."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON ({e.msg})", path=path, line=e.lineno) from None
    except UnicodeDecodeError:
        raise InputError("expected a UTF-8 JSON file", path=path) from None
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, found {type(value).__name__}", path=path)
    return value


def _token_string(value: Any, path: str, field: str) -> str | None:
    """A special token as written in tokenizer_config.json: a string or an AddedToken dict."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise InputError("expected a token string or an object with a 'content' string", path=path, field=field)


def _id_list(value: Any, path: str, field: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    raise InputError("expected an integer token id or a list of them", path=path, field=field)


def _chat_template(config: dict, config_path: str, directory: str) -> str | None:
    """chat_template.jinja wins over the config entry, as in transformers; a list of named templates
    yields the one named "default"."""
    jinja_path = os.path.join(directory, CHAT_TEMPLATE_FILE)
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            return f.read()
    template = config.get("chat_template")
    if template is None or isinstance(template, str):
        return template
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"]
    raise InputError("expected a template string or a list of {name, template} with a 'default' entry",
                     path=config_path, field="chat_template")


def read_tokenizer_files(directory: str) -> TokenizerFiles:
    """Reads tokenizer_config.json, generation_config.json, config.json and chat_template.jinja
    (each optional) from `directory`."""
    config_path = os.path.join(directory, TOKENIZER_CONFIG)
    config = read_json_object(config_path) or {}
    special = {}
    for name in NAMED_SPECIAL_TOKENS:
        token = _token_string(config.get(name), config_path, name)
        if token is not None:
            special[name] = token
    extra = []
    for field in ("additional_special_tokens", "extra_special_tokens"):
        values = config.get(field) or []
        if isinstance(values, dict):  # transformers 5 may store named extras as {name: token}
            values = list(values.values())
        if not isinstance(values, list):
            raise InputError("expected a list of tokens", path=config_path, field=field)
        extra.extend(_token_string(v, config_path, field) for v in values)

    # A base checkpoint may ship only config.json; generation_config.json, when present, is what
    # generation uses (Qwen2.5-Instruct lists both <|im_end|> and <|endoftext|> there).
    gen_path = os.path.join(directory, GENERATION_CONFIG)
    gen = read_json_object(gen_path)
    if gen is None:
        gen_path = os.path.join(directory, MODEL_CONFIG)
        gen = read_json_object(gen_path) or {}
    eos_ids = _id_list(gen.get("eos_token_id"), gen_path, "eos_token_id")
    pad_ids = _id_list(gen.get("pad_token_id"), gen_path, "pad_token_id")

    cleanup = config.get("clean_up_tokenization_spaces", False)
    if not isinstance(cleanup, bool):
        raise InputError("expected true or false", path=config_path, field="clean_up_tokenization_spaces")
    return TokenizerFiles(
        directory=directory,
        special_tokens=special,
        extra_special_tokens=tuple(dict.fromkeys(extra)),
        generation_eos_ids=eos_ids,
        generation_pad_id=pad_ids[0] if pad_ids else None,
        chat_template=_chat_template(config, config_path, directory),
        clean_up_tokenization_spaces=cleanup,
    )
