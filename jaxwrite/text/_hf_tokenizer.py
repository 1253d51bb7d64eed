"""Hugging Face `tokenizer.json` backend, through the `tokenizers` library (no transformers)."""
from __future__ import annotations

import json
import os
from typing import Sequence

import tokenizers

from jaxwrite.common.errors import InputError
from jaxwrite.text._tokenizer import Tokenizer
from jaxwrite.text._tokenizer_files import GENERATION_CONFIG, TOKENIZER_CONFIG, TokenizerFiles, read_tokenizer_files

# transformers' `clean_up_tokenization` replacements, applied only when the checkpoint asks for them.
_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def _byte_level_alphabet() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2 and successors): each byte is written as one printable
    character; printable Latin-1 bytes stand for themselves, the other 68 map to U+0100 onwards."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    table = {chr(b): b for b in kept}
    table.update({chr(256 + n): b for n, b in enumerate(shifted)})
    return table


class HFTokenizer(Tokenizer):
    """A fast tokenizer from `tokenizer.json`; ids match transformers' PreTrainedTokenizerFast."""

    def __init__(self, tokenizer_json: str):
        try:
            backend = tokenizers.Tokenizer.from_file(tokenizer_json)
        except Exception as e:  # the tokenizers library raises plain Exception subclasses
            raise InputError(f"expected a Hugging Face tokenizer.json ({str(e).splitlines()[0]})",
                             path=tokenizer_json) from None
        self._setup(backend, read_tokenizer_files(os.path.dirname(os.path.abspath(tokenizer_json))), tokenizer_json)

    @classmethod
    def from_backend(cls, backend: tokenizers.Tokenizer, files: TokenizerFiles, path: str) -> "HFTokenizer":
        """A tokenizer built in memory (e.g. from a GGUF file's metadata) with the settings in `files`."""
        self = cls.__new__(cls)
        self._setup(backend, files, path)
        return self

    def _setup(self, backend: tokenizers.Tokenizer, files: TokenizerFiles, path: str) -> None:
        self._tok = backend
        super().__init__(path, files)
        self._cleanup = files.clean_up_tokenization_spaces

    def save_pretrained(self, directory: str) -> None:
        """Writes tokenizer.json, tokenizer_config.json (named special tokens, chat template) and, when
        the EOS set came from it, generation_config.json: a directory HFTokenizer and transformers read."""
        os.makedirs(directory, exist_ok=True)
        self._tok.save(os.path.join(directory, "tokenizer.json"))
        config = {"tokenizer_class": "PreTrainedTokenizerFast", **self.special_tokens,
                  "clean_up_tokenization_spaces": self._cleanup}
        if self.chat_template is not None:
            config["chat_template"] = self.chat_template
        _write_json(os.path.join(directory, TOKENIZER_CONFIG), config)
        if self._files.generation_eos_ids:
            generation = {"eos_token_id": list(self._files.generation_eos_ids), "pad_token_id": self.pad_id}
            if self.bos_id is not None:
                generation["bos_token_id"] = self.bos_id
            _write_json(os.path.join(directory, GENERATION_CONFIG), generation)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        text = self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)
        if self._cleanup:
            for before, after in _CLEANUPS:
                text = text.replace(before, after)
        return text

    def token_bytes(self) -> list[bytes | None] | None:
        """Exact for byte-level decoders (Qwen2.5, Llama-3): a token's string spells its bytes in the
        byte-level alphabet; added tokens are their own text, special ones add nothing."""
        if self._cleanup or not isinstance(self._tok.decoder, tokenizers.decoders.ByteLevel):
            return None
        alphabet = _byte_level_alphabet()
        added = self._tok.get_added_tokens_decoder()
        out: list[bytes | None] = []
        for i in range(self.vocab_size):
            if i in added:
                out.append(None if added[i].special else added[i].content.encode("utf-8"))
                continue
            token = self._tok.id_to_token(i)
            if token is None or any(ch not in alphabet for ch in token):
                out.append(None)
            else:
                out.append(bytes(alphabet[ch] for ch in token))
        return out

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, token_id: int) -> str:
        token = self._tok.id_to_token(token_id)
        if token is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        return token


def _write_json(path: str, value: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")
