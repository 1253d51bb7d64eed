"""A judge served by jaxwrite's own inference engine, in process (no HTTP).

`mode="generate"` (default) is the plain local chat model: each verdict is sampled like the official
evaluators do, with the request's JSON schema (if any) enforced by constrained decoding.
`mode="score_logit"` is a NON-OFFICIAL fast mode: it forces `{"score": ` and reads the score
distribution from one prefill (see jaxwrite.infer.score_logit); its label says so. Its text is a verdict
JSON holding both figures in their own fields, `score_argmax` (the most likely score, also given as
`score`, the field verdict parsers read, so it is the one that aggregates) and `score_expected` (the
mean under the distribution), with `probs`, and a reason that states both. It reads one 1-10 score,
so it serves only verdicts of that shape (WritingBench's critic); nothing is sampled and no setting
of the request's sampling applies. A prompt the engine refuses (too long) is a permanent error.
"""
from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from jaxwrite.chat import ChatRequest, ChatResult, LocalChatModel
from jaxwrite.infer import Engine, GenerationRequest, ScoreReader
from jaxwrite.infer.score_logit import MODE as SCORE_LOGIT_MODE
from jaxwrite.infer.score_logit import SCORE_PREFIX

MODES = ("generate", "score_logit")


class LocalJudge(LocalChatModel):
    """`LocalChatModel` that can also judge in score_logit mode; pass `engine=` or `model=DIR`."""

    def __init__(self, engine: Engine | None = None, model: str | None = None, mode: str = "generate",
                 max_batch: int = 32, name: str | None = None):
        if mode not in MODES:
            raise ValueError(f"judge mode '{mode}': expected one of {', '.join(MODES)}")
        super().__init__(engine=engine, model=model, max_batch=max_batch, name=name)
        self.mode = mode
        self._reader = ScoreReader(self.engine) if mode == "score_logit" else None

    @property
    def label(self) -> str:
        kind = f"local[{SCORE_LOGIT_MODE}]" if self.mode == "score_logit" else "local"
        return f"{kind}:{self.name}"

    def describe(self) -> dict[str, Any]:
        if self._reader is None:
            return super().describe()
        # No sampling fields and no attempts: one forward pass reads the score, nothing is sampled.
        return {"label": self.label, "transport": "local", "mode": "score_logit", "official": False,
                "settings": {"model": self.name, "max_context": self.engine.max_context,
                             "score_range": [1, 10], "forced_prefix": SCORE_PREFIX,
                             "aggregates": "score_argmax", "also_stored": ["score_expected", "probs"]}}

    def identity(self) -> dict[str, Any]:
        """The local model's digests and the mode: a score_logit verdict is not a sampled one."""
        return dict(super().identity(), mode=self.mode)

    def prompt_ids(self, request: ChatRequest) -> list[int]:
        if self._reader is None:
            return super().prompt_ids(request)
        return self._reader.prompt_ids([dict(m) for m in request.messages])

    def answer(self, requests: Sequence[ChatRequest], prompts: dict[int, list[int]]
               ) -> Iterator[tuple[int, ChatResult]]:
        if self._reader is None:
            yield from super().answer(requests, prompts)
            return
        todo = []
        for i, ids in prompts.items():
            try:
                self.engine.check(GenerationRequest(ids))
                todo.append(i)
            except ValueError as err:
                yield i, ChatResult(text="", error=str(err), retryable=False)
        for i, dist in zip(todo, self._reader.read([prompts[i] for i in todo]) if todo else []):
            # One forward pass over the prompt: no token is generated.
            yield i, ChatResult(text=json.dumps(score_logit_verdict(dist)), finish_reason="score_logit",
                                prompt_tokens=len(prompts[i]), completion_tokens=0)


def score_logit_verdict(dist) -> dict[str, Any]:
    """The verdict a score distribution stands for: `score` is the argmax (what aggregates), and the
    reason names both figures, so it never disagrees with the stored score."""
    return {"score": dist.argmax, "score_argmax": dist.argmax, "score_expected": dist.expected,
            "probs": list(dist.probs), "mode": SCORE_LOGIT_MODE,
            "reason": f"{SCORE_LOGIT_MODE}: score {dist.argmax} is the most likely (p = "
                      f"{dist.probs[dist.argmax - 1]:.3f}); expected score {dist.expected:.4f}; "
                      "no reason text was generated"}


def score_logit_fields(text: str) -> dict[str, Any]:
    """{score_argmax, score_expected} of a score_logit verdict's text; {} for any other verdict."""
    try:
        verdict = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(verdict, dict) or verdict.get("mode") != SCORE_LOGIT_MODE:
        return {}
    return {k: verdict[k] for k in ("score_argmax", "score_expected") if k in verdict}
