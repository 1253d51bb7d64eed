"""SentencePiece backend (`*.model`), for tokenizers trained by jaxwrite and other SentencePiece models."""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import sentencepiece as spm

from jaxwrite.common.errors import InputError
from jaxwrite.text._chat_template import default_chat_template
from jaxwrite.text._tokenizer import Tokenizer
from jaxwrite.text._tokenizer_files import read_tokenizer_files


class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece model plus the tokenizer_config.json / generation_config.json beside it.

    Chat markup such as `<|im_start|>` is a user-defined piece, so it is one id when it appears in
    text. Without a template in the config, the ChatML template from jaxwrite/resources/ is used.
    """

    def __init__(self, model_file: str):
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.Load(model_file)
        except (OSError, RuntimeError) as e:
            raise InputError(f"expected a SentencePiece model ({str(e).splitlines()[0]})", path=model_file) from None
        files = read_tokenizer_files(os.path.dirname(os.path.abspath(model_file)))
        if files.chat_template is None:
            files = dataclasses.replace(files, chat_template=default_chat_template())
        own = lambda i: i if i >= 0 else None  # noqa: E731 - SentencePiece marks "none" with -1
        super().__init__(model_file, files, fallback_eos_id=own(self._sp.eos_id()),
                         fallback_pad_id=own(self._sp.pad_id()), fallback_bos_id=own(self._sp.bos_id()))
        # Ids that skip_special_tokens drops: control/unknown pieces plus every special token the
        # config names (user-defined chat markup would otherwise be printed).
        special = {i for i in range(self.vocab_size) if self._sp.IsControl(i) or self._sp.IsUnknown(i)}
        for token in (*files.special_tokens.values(), *files.extra_special_tokens):
            token_id = self.token_to_id(token)
            if token_id is not None:
                special.add(token_id)
        self._special_ids = frozenset(special)

    @property
    def vocab_size(self) -> int:
        return self._sp.GetPieceSize()

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = self._sp.EncodeAsIds(text)
        if add_special_tokens and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        ids = [int(i) for i in ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._special_ids]
        return self._sp.DecodeIds(ids)

    def token_bytes(self) -> list[bytes | None]:
        """Byte-fallback pieces (<0xAB>) are one byte, others their text with the word-boundary mark
        as a space; control, unknown and special pieces add nothing."""
        out: list[bytes | None] = []
        for i in range(self.vocab_size):
            if i in self._special_ids:
                out.append(None)
            elif self._sp.IsByte(i):
                out.append(bytes([int(self._sp.IdToPiece(i)[3:5], 16)]))
            else:
                out.append(self._sp.IdToPiece(i).replace("\u2581", " ").encode("utf-8") or None)
        return out

    def token_to_id(self, token: str) -> int | None:
        token_id = self._sp.PieceToId(token)
        # PieceToId answers unk for pieces it does not know.
        if self._sp.IsUnknown(token_id) and token != self._sp.IdToPiece(token_id):
            return None
        return token_id

    def id_to_token(self, token_id: int) -> str:
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        return self._sp.IdToPiece(token_id)
