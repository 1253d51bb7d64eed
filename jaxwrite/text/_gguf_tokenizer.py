"""A GGUF file's tokenizer: byte-level BPE rebuilt from llama.cpp's metadata with the `tokenizers` library.

A GGUF carries the vocabulary (`tokenizer.ggml.tokens`, already spelled in the byte-level alphabet), the
merges, each token's type, the special token ids, the chat template and the name of the pre-tokenizer
its merges were learned with (`tokenizer.ggml.pre`). The pre-tokenizer is rebuilt from that name as the
original tokenizer.json has it (the regexes llama.cpp reproduces for the same names), so ids match the
model's own Hugging Face tokenizer. Control tokens become special added tokens (matched whole, skipped
when decoding); user-defined ones plain added tokens (matched whole, kept in text).
"""
from __future__ import annotations

import dataclasses
import os

import tokenizers
from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors

from jaxwrite.common.errors import InputError
from jaxwrite.common.gguf_file import GGUFFile, open_gguf
from jaxwrite.text._hf_tokenizer import HFTokenizer
from jaxwrite.text._tokenizer_files import TokenizerFiles

_CONTROL, _USER_DEFINED = 3, 4    # llama.cpp's token types (NORMAL 1, UNKNOWN 2, UNUSED 5, BYTE 6)

# The split regexes of the original tokenizer.json files, by llama.cpp's pre-tokenizer name.
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# name -> (split regex or None for GPT-2's own, digits one by one first, NFC first, merges ignored for
# whole-word vocabulary hits as Llama-3's tokenizer.json asks)
_PRE_TOKENIZERS = {
    "gpt2": (None, False, False, False), "gpt-2": (None, False, False, False),
    "smollm": (None, True, False, False), "starcoder": (None, True, False, False),
    "refact": (None, True, False, False), "codeshell": (None, True, False, False),
    "llama-bpe": (_LLAMA3, False, False, True), "llama3": (_LLAMA3, False, False, True),
    "llama-v3": (_LLAMA3, False, False, True), "smaug-bpe": (_LLAMA3, False, False, True),
    "qwen2": (_QWEN2, False, True, False), "deepseek-r1-qwen": (_QWEN2, False, True, False),
}


@dataclasses.dataclass(frozen=True)
class _GGUFSettings(TokenizerFiles):
    """TokenizerFiles whose every setting comes from the GGUF file itself (errors name that file)."""

    def where(self, name: str) -> str:
        return self.directory


def _pre_tokenizer(pre: str, path: str):
    if pre not in _PRE_TOKENIZERS:
        raise InputError(f"pre-tokenizer '{pre}' is not supported; expected one of {', '.join(_PRE_TOKENIZERS)}",
                         path=path, field="tokenizer.ggml.pre")
    regex, digits, nfc, ignore_merges = _PRE_TOKENIZERS[pre]
    steps = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
    if regex is None:   # GPT-2's split is ByteLevel's own
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True))
    else:
        steps += [pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
                  pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]
    return pre_tokenizers.Sequence(steps), nfc, ignore_merges


def _backend(gfile: GGUFFile) -> tokenizers.Tokenizer:
    path = gfile.path
    kind = gfile.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise InputError(f"tokenizer model '{kind}' is not supported; expected gpt2 (byte-level BPE)", path=path,
                         field="tokenizer.ggml.model")
    tokens = list(gfile.require("tokenizer.ggml.tokens"))
    types = list(gfile.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    merges = []
    for i, merge in enumerate(gfile.require("tokenizer.ggml.merges")):
        pair = merge.split(" ")
        if len(pair) != 2:
            raise InputError(f"merge {i} {merge!r}: expected two tokens separated by one space", path=path,
                             field="tokenizer.ggml.merges")
        merges.append((pair[0], pair[1]))
    pre, nfc, ignore_merges = _pre_tokenizer(gfile.get("tokenizer.ggml.pre", "default"), path)
    model = tokenizers.models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, unk_token=None,
                                  fuse_unk=False, byte_fallback=False, ignore_merges=ignore_merges)
    tok = tokenizers.Tokenizer(model)
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind == _CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, kind in zip(tokens, types) if kind == _USER_DEFINED])
    bos = gfile.get("tokenizer.ggml.bos_token_id")
    if gfile.get("tokenizer.ggml.add_bos_token") and bos is not None:
        # As the original tokenizer.json does it: encode(add_special_tokens=True) puts BOS first.
        name = tokens[int(bos)]
        tok.post_processor = processors.TemplateProcessing(single=f"{name}:0 $A:0", pair=f"{name}:0 $A:0 {name}:1 $B:1",
                                                           special_tokens=[(name, int(bos))])
    return tok


def _settings(gfile: GGUFFile, vocab: int) -> _GGUFSettings:
    tokens = gfile.require("tokenizer.ggml.tokens")
    special = {}
    for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("sep_token", "seperator"),
                      ("pad_token", "padding"), ("mask_token", "mask")):
        token_id = gfile.get(f"tokenizer.ggml.{key}_token_id")
        if token_id is None:
            continue
        if not 0 <= int(token_id) < vocab:
            raise InputError(f"token id {token_id} is outside the vocabulary [0, {vocab})", path=gfile.path,
                             field=f"tokenizer.ggml.{key}_token_id")
        special[name] = tokens[int(token_id)]
    # llama.cpp ends generation on EOS, end-of-turn and end-of-message alike.
    ends = (gfile.get(f"tokenizer.ggml.{key}_token_id") for key in ("eos", "eot", "eom"))
    eos = tuple(dict.fromkeys(int(token_id) for token_id in ends if token_id is not None))
    pad = gfile.get("tokenizer.ggml.padding_token_id")
    return _GGUFSettings(directory=gfile.path, special_tokens=special, extra_special_tokens=(),
                         generation_eos_ids=eos, generation_pad_id=None if pad is None else int(pad),
                         chat_template=gfile.get("tokenizer.chat_template"), clean_up_tokenization_spaces=False)


def gguf_tokenizer(source: str | os.PathLike | GGUFFile) -> HFTokenizer:
    """The tokenizer (with special tokens, EOS set and chat template) a GGUF file describes."""
    gfile = open_gguf(source)
    backend = _backend(gfile)
    return HFTokenizer.from_backend(backend, _settings(gfile, backend.get_vocab_size(with_added_tokens=True)),
                                    gfile.path)
