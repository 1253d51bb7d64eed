"""The writing reward: a trained Bradley–Terry reward model scoring (prompt, answer) pairs in batches,
sharded on the same mesh as the policy. Rows are rendered exactly as the RM saw them in training
(chat template, user = prompt, assistant = answer; the reward is read at the end-of-turn token)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from data_pipelines.chat_sft import assistant_turn_ids
from jaxwrite.checkpoint import load_model_from_checkpoint, tokenizer_dir_of
from jaxwrite.common import InputError
from jaxwrite.models import RewardModel
from jaxwrite.parallel import logical_sharding, use_mesh_rules
from jaxwrite.text import load_tokenizer


class RewardModelScorer:
    """`scorer(pairs) -> list[float]`: one BT score per (prompt text, answer text)."""

    def __init__(self, path: str, mesh, max_len: int = 2048, batch_size: int = 16):
        model, cfg = load_model_from_checkpoint(path, mesh=mesh)
        if not isinstance(model, RewardModel):
            raise InputError(f"expected a reward model checkpoint, found a {type(model).__name__}",
                             path=path, field="rl.rm_path")
        tok_dir = tokenizer_dir_of(path)
        if tok_dir is None:
            raise InputError("reward model checkpoint has no tokenizer/ copy", path=path)
        self.tokenizer = load_tokenizer(tok_dir)
        self.mesh, self.max_len, self.batch_size = mesh, min(max_len, cfg.max_seq_len), batch_size
        graphdef, state = nnx.split(model)

        @jax.jit
        def score(state, tokens, lengths):
            rm = nnx.merge(graphdef, state)
            mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
            return rm(tokens, attention_mask=mask)                       # [batch]

        self._state, self._score = state, score

    def _row(self, prompt: str, answer: str) -> list[int]:
        prompt_ids, turn_ids, trained = assistant_turn_ids(self.tokenizer, [{"role": "user", "content": prompt}],
                                                           answer)
        ids = prompt_ids + turn_ids[:trained]
        if len(ids) > self.max_len:   # keep the prompt and the end-of-turn token, as in RM training
            ids = ids[:self.max_len - 1] + [ids[-1]]
        return ids

    def __call__(self, pairs: list[tuple[str, str]]) -> list[float]:
        rows = [self._row(p, a) for p, a in pairs]
        out: list[float] = []
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start:start + self.batch_size]
            length = 64
            while length < max(map(len, chunk)):
                length *= 2
            tokens = np.full((self.batch_size, length), self.tokenizer.pad_id, np.int32)  # fixed batch: one compile
            lengths = np.ones((self.batch_size,), np.int32)
            for i, ids in enumerate(chunk):
                tokens[i, :len(ids)], lengths[i] = ids, len(ids)
            with use_mesh_rules(self.mesh):
                tokens = jax.device_put(tokens, logical_sharding(("batch", None), tokens.shape, self.mesh))
                lengths = jax.device_put(lengths, logical_sharding(("batch",), lengths.shape, self.mesh))
                scores = np.asarray(self._score(self._state, tokens, lengths))
            out.extend(float(s) for s in scores[:len(chunk)])
        return out
