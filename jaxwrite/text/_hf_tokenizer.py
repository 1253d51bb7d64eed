"""Hugging Face `tokenizer.json` backend, through the `tokenizers` library (no transformers)."""
from __future__ import annotations

import os
from typing import Sequence

import tokenizers

from jaxwrite.common.errors import InputError
from jaxwrite.text._tokenizer import Tokenizer
from jaxwrite.text._tokenizer_files import read_tokenizer_files

# transformers' `clean_up_tokenization` replacements, applied only when the checkpoint asks for them.
_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class HFTokenizer(Tokenizer):
    """A fast tokenizer from `tokenizer.json`; ids match transformers' PreTrainedTokenizerFast."""

    def __init__(self, tokenizer_json: str):
        try:
            self._tok = tokenizers.Tokenizer.from_file(tokenizer_json)
        except Exception as e:  # the tokenizers library raises plain Exception subclasses
            raise InputError(f"expected a Hugging Face tokenizer.json ({str(e).splitlines()[0]})",
                             path=tokenizer_json) from None
        files = read_tokenizer_files(os.path.dirname(os.path.abspath(tokenizer_json)))
        super().__init__(tokenizer_json, files)
        self._cleanup = files.clean_up_tokenization_spaces

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

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, token_id: int) -> str:
        token = self._tok.id_to_token(token_id)
        if token is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        return token
