"""`Tokenizer`: one interface over SentencePiece models and Hugging Face tokenizer.json files.

Backends implement the vocabulary operations; this base class adds what every caller needs on top:
the EOS set, pad/bos ids, and chat-template rendering and encoding.
"""
from __future__ import annotations

import abc
from typing import Any, Sequence

from jaxwrite.common.errors import InputError
from jaxwrite.text._chat_template import render_chat_template
from jaxwrite.text._tokenizer_files import GENERATION_CONFIG, TOKENIZER_CONFIG, TokenizerFiles


class Tokenizer(abc.ABC):
    """Text <-> token ids, special ids and chat templates for one checkpoint.

    Attributes:
      path: the file the vocabulary was read from.
      special_tokens: named special tokens (`bos_token`, `eos_token`, ...) handed to chat templates.
      eos_ids: every id that ends generation, generation_config.json's first, then the
        tokenizer's eos_token.
      pad_id: tokenizer pad_token, else generation pad_token_id, else the first EOS id.
      bos_id: the tokenizer's bos_token id, None when the tokenizer has no BOS (Qwen).
      chat_template: Jinja source, or None.
    """

    def __init__(self, path: str, files: TokenizerFiles, *, fallback_eos_id: int | None = None,
                 fallback_pad_id: int | None = None, fallback_bos_id: int | None = None):
        self.path = path
        self.special_tokens = dict(files.special_tokens)
        self.chat_template = files.chat_template
        self._files = files
        config_path = files.where(TOKENIZER_CONFIG)
        named = {name: self._require_token(token, config_path, name)
                 for name, token in files.special_tokens.items()}
        for token_id in files.generation_eos_ids:
            self._require_id(token_id, files.where(GENERATION_CONFIG), "eos_token_id")

        eos = list(files.generation_eos_ids)
        if "eos_token" in named:
            eos.append(named["eos_token"])
        elif not eos and fallback_eos_id is not None:
            eos.append(fallback_eos_id)
        if not eos:
            raise InputError("no end-of-sequence token: expected 'eos_token' in tokenizer_config.json "
                             "or 'eos_token_id' in generation_config.json", path=files.directory)
        self.eos_ids: tuple[int, ...] = tuple(dict.fromkeys(eos))
        pad = named.get("pad_token", files.generation_pad_id)
        if pad is None:
            pad = fallback_pad_id
        self.pad_id: int = self.eos_ids[0] if pad is None else pad
        self.bos_id: int | None = named.get("bos_token", fallback_bos_id)

    def _require_token(self, token: str, path: str, field: str) -> int:
        token_id = self.token_to_id(token)
        if token_id is None:
            raise InputError(f"token {token!r} is not in the vocabulary of {self.path}", path=path, field=field)
        return token_id

    def _require_id(self, token_id: int, path: str, field: str) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise InputError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})",
                             path=path, field=field)

    # --- vocabulary operations, per backend ---------------------------------------------------

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce, added tokens included (a model's embedding
        table may be padded beyond it)."""

    @abc.abstractmethod
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; special-token strings in the text map to their single ids.
        `add_special_tokens` adds what the tokenizer adds around a sequence (e.g. Llama-3's BOS)."""

    @abc.abstractmethod
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of `ids`."""

    @abc.abstractmethod
    def token_to_id(self, token: str) -> int | None:
        """Id of a vocabulary entry, None when absent."""

    @abc.abstractmethod
    def id_to_token(self, token_id: int) -> str:
        """Vocabulary entry of `token_id` (ValueError when out of range)."""

    # --- chat ---------------------------------------------------------------------------------

    def token_bytes(self) -> list[bytes | None] | None:
        """Exactly the bytes each token id adds to decoded text (None for tokens that add none, e.g.
        special tokens), when the backend knows them; None when it does not. Byte tokens carry partial
        UTF-8 characters, which constrained decoding completes."""
        return None

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, **template_kwargs: Any) -> str:
        """The prompt text for `messages`, rendered as transformers renders it."""
        if self.chat_template is None:
            raise InputError(f"no chat template: expected 'chat_template' in {TOKENIZER_CONFIG} "
                             f"or a chat_template.jinja file", path=self._files.directory)
        return render_chat_template(self.chat_template, messages, add_generation_prompt=add_generation_prompt,
                                    special_tokens=self.special_tokens, tools=tools, **template_kwargs)

    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True,
                    tools: list[dict] | None = None, **template_kwargs: Any) -> list[int]:
        """Ids of the rendered chat; the template already holds any BOS, so none is added."""
        text = self.apply_chat_template(messages, add_generation_prompt, tools, **template_kwargs)
        return self.encode(text, add_special_tokens=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, vocab_size={self.vocab_size}, eos_ids={self.eos_ids})"
