"""Chat templates rendered the way `transformers.apply_chat_template` renders them.

The same Jinja environment (sandboxed, trim_blocks, lstrip_blocks, loop controls), the same extra
globals and filters, and the same conversation clean-up before rendering, so a prompt built here is
byte-identical to the one the Hugging Face tokenizer builds for the same checkpoint.
"""
from __future__ import annotations

import functools
import importlib.resources
import json
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Names a message's reasoning may arrive under; transformers copies it to the first two so that
# templates reading either one see it.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def default_chat_template() -> str:
    """The ChatML template shipped in jaxwrite/resources/ (for jaxwrite SentencePiece tokenizers)."""
    return importlib.resources.files("jaxwrite").joinpath("resources", "chatml.jinja").read_text(encoding="utf-8")


class _GenerationBlock(jinja2.ext.Extension):
    """Accepts `{% generation %}...{% endgeneration %}` (used by some Hub templates to mark assistant
    text) and renders its body unchanged, as transformers does when not asked for a token mask."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller) -> str:
        return caller()


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    # Jinja's own tojson escapes HTML characters; chat templates expect plain json.dumps output.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _TemplateNamespace(jinja2.utils.Namespace):
    """`namespace()` that refuses underscore attributes, so templates cannot reach Python internals."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates may not set attribute {name!r} on a namespace")


class _TemplateDict:
    """`dict(...)` inside templates without exposing the dict type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


@functools.lru_cache(maxsize=16)
def compile_chat_template(source: str) -> jinja2.Template:
    """Compiles a template once; templates come from checkpoints, so they run sandboxed."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env.from_string(source)


def _normalise_messages(messages: list[dict]) -> list[dict]:
    """Drops None-valued keys and aliases reasoning fields, as transformers does before rendering."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError("a chat needs at least one message (a list of {'role', 'content'} dicts)")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"message {i}: expected a dict with 'role' and 'content', got {type(message).__name__}")
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def render_chat_template(source: str, messages: list[dict], *, add_generation_prompt: bool = True,
                         special_tokens: dict[str, str] | None = None, tools: list[dict] | None = None,
                         **template_kwargs: Any) -> str:
    """Renders `messages` with the template `source`.

    `special_tokens` maps names such as `bos_token`/`eos_token` to their strings (the tokenizer's
    named special tokens); `template_kwargs` (e.g. `enable_thinking=False`) override them.
    `tools` are JSON-schema dicts.
    """
    if tools is not None and not all(isinstance(tool, dict) for tool in tools):
        raise TypeError("tools must be JSON-schema dicts")
    variables = {**(special_tokens or {}), **template_kwargs}
    return compile_chat_template(source).render(
        messages=_normalise_messages(messages), tools=tools, documents=None,
        add_generation_prompt=add_generation_prompt, **variables)
