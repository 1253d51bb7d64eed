"""Score-logit mode — a NON-OFFICIAL fast judge mode.

Instead of sampling a whole `{"score": s, "reason": "..."}` verdict, the judge's output is forced up to
the score (`{"score": ` after the chat prompt) and the distribution over the score tokens is read from
the next-token logits. This is not how WritingBench's official critic is run (it samples with
temperature 1.0 and parses the JSON); results carry `mode: "score_logit (non-official)"`.

Scores "1".."9" are single tokens in every tokenizer jaxwrite supports, "10" often is not (Qwen splits
digits one per token). Both cases are covered by one prefill of prompt + "1": the logits before the
"1" give the score token's distribution and the logits after it what follows a "1". Then
  P(10) = P(tokens spelling "10…") + P("1") · P("0" | "1"),
  P(1)  = P(tokens spelling "1" + non-digit) + P("1") · P(non-digit | "1"),
continuations "1" + other digits (11..19) are invalid and dropped, and the ten values are renormalised.
Tokens count by their text: any token whose text starts with the score followed by a non-digit
(e.g. "7," or "7") counts for that score.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

MODE = "score_logit (non-official)"
SCORE_PREFIX = '{"score": '
_SCORE_TEXT = re.compile(rb"^(10|[1-9])(?![0-9])")
_ZERO_TEXT = re.compile(rb"^0(?![0-9])")
_DIGIT_START = re.compile(rb"^[0-9]")


@dataclasses.dataclass(frozen=True)
class ScoreDistribution:
    """probs[k-1] = P(score = k), k = 1..10 (renormalised over valid scores)."""
    probs: tuple[float, ...]
    argmax: int
    expected: float
    mode: str = MODE


class ScoreReader:
    """Reads score distributions with an Engine's prefill (one batched pass, no decoding)."""

    def __init__(self, engine):
        self.engine = engine
        token_bytes = engine.constraints.token_bytes()
        vocab = len(token_bytes)
        self.score_of = np.zeros(vocab, np.int32)        # 0 = not a score token, else 1..10
        self.zero = np.zeros(vocab, bool)                 # continuation "0" (-> 10)
        self.digit = np.zeros(vocab, bool)                # any digit continuation
        self.one_ids: list[int] = []                      # tokens spelling exactly "1"
        for i, b in enumerate(token_bytes):
            if not b:
                continue
            if b == b"1":
                self.one_ids.append(i)
            else:
                m = _SCORE_TEXT.match(b)
                if m:
                    self.score_of[i] = int(m.group(1))
            self.zero[i] = bool(_ZERO_TEXT.match(b))
            self.digit[i] = bool(_DIGIT_START.match(b))
        if not self.one_ids and not (self.score_of == 1).any():
            raise ValueError("tokenizer has no token for the score '1'")
        # The "1" that P(10) is read after must be the id the tokenizer itself writes for "1": with
        # SentencePiece byte fallback the byte piece <0x31> also spells "1" but never occurs in training
        # text, so reading after it turned every trained "10" into a 1.
        written = engine.tokenizer.encode("1")
        if len(written) == 1 and written[0] in self.one_ids:
            self.one_ids.sort(key=lambda i: i != written[0])

    def prompt_ids(self, messages: list[dict], prefix: str = SCORE_PREFIX) -> list[int]:
        """The chat prompt with the judge's reply forced up to the score."""
        tok = self.engine.tokenizer
        return tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True) + prefix)

    def read(self, prompts: Sequence[Sequence[int]]) -> list[ScoreDistribution]:
        """One distribution per prompt (prompt ids already end with the forced prefix)."""
        one = self.one_ids[0] if self.one_ids else None
        if one is None:
            probs = _softmax(self.engine.last_logits(prompts)[:, -1])               # [n, vocab]
            after = None
        else:
            # One sequence per prompt, prompt + "1": the second-to-last position gives the score
            # token's distribution, the last one what follows a "1".
            both = _softmax(self.engine.last_logits([list(p) + [one] for p in prompts], tail=2))
            probs, after = both[:, 0], both[:, 1]
        out = []
        for i in range(len(prompts)):
            p = probs[i]
            mass = np.array([p[self.score_of == k].sum() for k in range(1, 11)])   # [10]
            if after is not None:
                p_one = p[self.one_ids].sum()
                mass[9] += p_one * after[i][self.zero].sum()
                mass[0] += p_one * after[i][~self.digit].sum()
            total = mass.sum()
            dist = mass / total if total > 0 else np.full(10, 0.1)
            out.append(ScoreDistribution(tuple(float(x) for x in dist), int(np.argmax(dist)) + 1,
                                         float(np.dot(dist, np.arange(1, 11)))))
        return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
