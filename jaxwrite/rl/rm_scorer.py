"""The writing reward: a trained Bradley–Terry reward model scoring (prompt, answer) pairs in batches,
sharded on the same mesh as the policy. Rows are rendered exactly as the RM saw them in training
(chat template, user = prompt, assistant = answer; the reward is read at the end-of-turn token).

The whole answer is scored. GRPO answers run to 14,000 tokens, longer than most RMs' context, and
scoring only a prefix would make the writing reward blind to everything the policy writes after it
(endings, late repetition, padding). An answer that does not fit is split into consecutive chunks of
its own tokens; each chunk is rendered like a training row (the same user prompt, assistant = the
chunk, end-of-turn token last, which is also how RM training renders a truncated answer), and the
chunk scores are pooled by a mean weighted by each chunk's token count (see `pool_chunk_scores`).
"""
from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from data_pipelines.chat_sft import assistant_turn_ids
from jaxwrite.checkpoint import load_pretrained, pretrained_tokenizer_path
from jaxwrite.common import InputError
from jaxwrite.models import RewardModel
from jaxwrite.parallel import logical_sharding, use_mesh_rules
from jaxwrite.text import load_tokenizer

log = logging.getLogger(__name__)

_MIN_BUCKET = 64   # shortest padded row length; buckets double from here up to max_len


def resolve_rm_max_len(requested: int, own: int) -> int:
    """The scoring length: the RM's own maximum (`requested` <= 0), or `requested` as a cap on it."""
    if own <= 0:
        raise ValueError(f"reward model max_seq_len: expected a positive length, got {own}")
    return own if requested <= 0 else min(int(requested), own)


def split_even(ids: list[int], room: int) -> list[list[int]]:
    """Consecutive pieces of `ids`, each at most `room` long, as few as possible and of near-equal size.

    Equal sizes rather than "full chunks plus a remainder": a last chunk of a handful of tokens would
    be scored with almost no text to judge, however little weight it then gets.
    """
    if room <= 0:
        raise ValueError(f"room: expected a positive chunk length, got {room}")
    count = max(1, -(-len(ids) // room))
    bounds = [i * len(ids) // count for i in range(count + 1)]
    return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def pool_chunk_scores(scores, token_counts) -> float:
    """Token-count-weighted mean of chunk scores.

    A BT score is a logit of preference (r(x, y_w) − r(x, y_l) is the log-odds that y_w wins), so
    chunk scores live on one additive scale and their mean is a meaningful pooled score. Weighting by
    tokens makes every token of the answer count equally, whatever the chunking; for an answer that
    fits (one chunk) the score is the RM's plain score.
    """
    scores, weights = np.asarray(scores, np.float64), np.asarray(token_counts, np.float64)
    if scores.shape != weights.shape or scores.size == 0:
        raise ValueError(f"expected one token count per chunk score, got {weights.shape} and {scores.shape}")
    if weights.sum() <= 0:
        return float(scores.mean())
    return float(np.dot(weights, scores) / weights.sum())


class RewardModelScorer:
    """`scorer(pairs) -> list[float]`: one BT score per (prompt text, answer text).

    max_len <= 0 scores up to the RM's own maximum length (its config max_seq_len); a positive
    max_len caps it (e.g. to bound memory). Longer answers are chunked (module docstring).
    """

    def __init__(self, path: str, mesh, max_len: int = 0, batch_size: int = 16):
        # A jaxwrite checkpoint, or a Hugging Face *ForSequenceClassification dir / hub id.
        model = load_pretrained(path, mesh=mesh, field="rl.rm_path")
        cfg = model.cfg
        if not isinstance(model, RewardModel):
            raise InputError(f"expected a reward model checkpoint, found a {type(model).__name__}",
                             path=path, field="rl.rm_path")
        tok_dir = pretrained_tokenizer_path(path, field="rl.rm_path")
        if tok_dir is None:
            raise InputError("reward model checkpoint has no tokenizer of its own (tokenizer/ copy or "
                             "tokenizer.json); expected one", path=path)
        self.tokenizer = load_tokenizer(tok_dir)
        self.mesh, self.batch_size = mesh, batch_size
        self.max_len = resolve_rm_max_len(int(max_len), int(cfg.max_seq_len))
        self._warned_long_prompt = False
        graphdef, state = nnx.split(model)

        @jax.jit
        def score(state, tokens, lengths):
            rm = nnx.merge(graphdef, state)
            mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
            return rm(tokens, attention_mask=mask)                       # [batch]

        self._state, self._score = state, score

    def chunk_rows(self, prompt: str, answer: str) -> list[tuple[list[int], int]]:
        """(token ids, answer tokens in it) per chunk row of one pair; one row when the answer fits."""
        prompt_ids, turn_ids, trained = assistant_turn_ids(self.tokenizer, [{"role": "user", "content": prompt}],
                                                           answer)
        body, end = turn_ids[:trained - 1], turn_ids[trained - 1]    # answer tokens, end-of-turn token
        room = self.max_len - len(prompt_ids) - 1
        if len(body) <= room:
            return [(prompt_ids + body + [end], len(body))]
        if room <= 0:
            return [self._prompt_overflow_row(prompt_ids, body, end)]
        return [(prompt_ids + piece + [end], len(piece)) for piece in split_even(body, room)]

    def _prompt_overflow_row(self, prompt_ids: list[int], body: list[int], end: int) -> tuple[list[int], int]:
        # RM training drops such rows, so there is no faithful rendering; keep the run going on a
        # prompt prefix (the same for every sample of the prompt) and say so once.
        if not self._warned_long_prompt:
            log.warning("writing RM: a prompt of %d tokens leaves no room for the answer in %d tokens; "
                        "scoring a truncated row", len(prompt_ids), self.max_len)
            self._warned_long_prompt = True
        return (prompt_ids + body)[:self.max_len - 1] + [end], 1

    def __call__(self, pairs: list[tuple[str, str]]) -> list[float]:
        per_pair = [self.chunk_rows(p, a) for p, a in pairs]
        scores = self.score_rows([ids for rows in per_pair for ids, _ in rows])
        out, at = [], 0
        for rows in per_pair:
            out.append(pool_chunk_scores(scores[at:at + len(rows)], [n for _, n in rows]))
            at += len(rows)
        return out

    def score_rows(self, rows: list[list[int]]) -> np.ndarray:
        """RM score of each rendered row (at most max_len ids) [len(rows)], in fixed-shape batches."""
        if any(len(ids) > self.max_len for ids in rows):
            raise ValueError(f"score_rows: a row is longer than max_len={self.max_len}")
        # Rows of similar length share a batch, so chunk rows (all near max_len) do not pad short ones.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        scores = np.empty(len(rows), np.float64)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            scores[batch] = self._score_batch([rows[i] for i in batch])
        return scores

    def _bucket(self, longest: int) -> int:
        # Powers of two up to max_len: one compile per bucket, never longer than the RM's context.
        length = _MIN_BUCKET
        while length < longest:
            length *= 2
        return min(length, self.max_len)

    def _score_batch(self, rows: list[list[int]]) -> np.ndarray:
        length = self._bucket(max(map(len, rows)))
        tokens = np.full((self.batch_size, length), self.tokenizer.pad_id, np.int32)  # fixed batch: one compile
        lengths = np.ones((self.batch_size,), np.int32)
        for i, ids in enumerate(rows):
            tokens[i, :len(ids)], lengths[i] = ids, len(ids)
        with use_mesh_rules(self.mesh):
            tokens = jax.device_put(tokens, logical_sharding(("batch", None), tokens.shape, self.mesh))
            lengths = jax.device_put(lengths, logical_sharding(("batch",), lengths.shape, self.mesh))
            scores = np.asarray(self._score(self._state, tokens, lengths))
        return scores[:len(rows)]
