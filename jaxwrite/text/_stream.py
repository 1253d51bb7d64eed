"""Streaming detokenisation: text for each new token, never half a character.

Decoding one token at a time is wrong for byte-level and byte-fallback vocabularies (a CJK
character may span several tokens) and for tokenizers whose pieces carry a leading space marker.
So each step decodes a short window of recent ids and emits only what the new token added, and
holds text back while it ends in U+FFFD (an incomplete UTF-8 sequence).
"""
from __future__ import annotations

from jaxwrite.text._tokenizer import Tokenizer

_INCOMPLETE = "\ufffd"


class StreamDecoder:
    """`push(token_id)` returns the new text; `flush()` returns whatever is still held back.

    The concatenation of all pushes and the final flush equals `tok.decode(all_ids)` for
    tokenizers whose decoding is local (BPE, byte-level, SentencePiece).
    """

    def __init__(self, tok: Tokenizer, skip_special_tokens: bool = True):
        self._tok = tok
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = 0   # window start: ids before it are never decoded again
        self._read = 0     # ids up to here have been emitted as text

    def push(self, token_id: int) -> str:
        self._ids.append(int(token_id))
        emitted = self._tok.decode(self._ids[self._prefix:self._read], self._skip)
        current = self._tok.decode(self._ids[self._prefix:], self._skip)
        if current.endswith(_INCOMPLETE) or len(current) <= len(emitted):
            return ""  # wait for the rest of the character (or the token added no text yet)
        new_text = current[len(emitted):]
        self._prefix, self._read = self._read, len(self._ids)
        return new_text

    def flush(self) -> str:
        """Text of ids still held back (an unfinished character comes out as U+FFFD)."""
        emitted = self._tok.decode(self._ids[self._prefix:self._read], self._skip)
        current = self._tok.decode(self._ids[self._prefix:], self._skip)
        self._prefix = self._read = len(self._ids)
        return current[len(emitted):]
