"""Digests that name an in-process model for the call cache: the weights as they run and the tokenizer
that renders and reads its turns. Two models with equal digests answer a seeded request alike, so a
cached answer of one is the other's answer too.

`weights_digest` hashes every parameter's path, dtype, shape and bytes as loaded (after any
dequantization or dtype cast, so a GGUF file and its float32 export differ exactly when their weights
do); an array spread over several hosts is hashed from this process's shards, so each host names it by
what it holds. `tokenizer_digest` hashes the vocabulary size, special ids, chat template and the ids of a
fixed multilingual probe text.
"""
from __future__ import annotations

import hashlib
import json

import jax
import numpy as np
from flax import nnx

# Exercises byte-level merges, CJK, digits, whitespace runs and the chat markers a template writes.
_PROBE = ("The critic's verdict: {\"score\": 7, \"reason\": \"清晰，结构完整。\"}\n\n  - item 1\n"
          "<|im_start|>user\nÉcrivez 3 000 mots.<|im_end|>\t</think>\n\n<answer>")


def weights_digest(model: nnx.Module) -> str:
    """sha256 over the model's parameters (path, dtype, shape, bytes), in path order."""
    digest = hashlib.sha256()
    leaves = jax.tree_util.tree_flatten_with_path(nnx.state(model))[0]
    for path, leaf in sorted(leaves, key=lambda pl: jax.tree_util.keystr(pl[0])):
        digest.update(f"{jax.tree_util.keystr(path)}|{leaf.dtype}|{tuple(leaf.shape)}|".encode())
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            for shard in sorted(leaf.addressable_shards, key=lambda s: str(s.index)):
                digest.update(str(shard.index).encode())
                digest.update(np.ascontiguousarray(np.asarray(shard.data)).tobytes())
        else:
            digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()


def tokenizer_digest(tokenizer) -> str:
    """sha256 over what decides a tokenizer's prompts and answers (see the module note)."""
    fields = {"vocab_size": tokenizer.vocab_size, "eos_ids": list(tokenizer.eos_ids), "pad_id": tokenizer.pad_id,
              "bos_id": tokenizer.bos_id, "special_tokens": tokenizer.special_tokens,
              "chat_template": tokenizer.chat_template, "probe": tokenizer.encode(_PROBE)}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()
