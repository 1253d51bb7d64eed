"""A judge served by jaxwrite's own inference engine, in process (no HTTP).

`mode="generate"` (default) is the plain local chat model: each verdict is sampled like the official
evaluators do, with the request's JSON schema (if any) enforced by constrained decoding.
`mode="score_logit"` is a NON-OFFICIAL fast mode: it forces `{"score": ` and reads the score
distribution from one prefill (see jaxwrite.infer.score_logit); its text is a verdict JSON whose reason
states the mode, and its label says so.
"""
from __future__ import annotations

import json
from typing import Iterator, Sequence

from jaxwrite.chat import ChatRequest, ChatResult, LocalChatModel
from jaxwrite.evals.judges import JUDGES
from jaxwrite.infer import Engine, GenerationRequest, ScoreReader
from jaxwrite.infer.score_logit import MODE as SCORE_LOGIT_MODE

MODES = ("generate", "score_logit")


@JUDGES.register("local")
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
                yield i, ChatResult(text="", error=str(err))
        for i, dist in zip(todo, self._reader.read([prompts[i] for i in todo]) if todo else []):
            verdict = {"score": dist.argmax,
                       "reason": f"{SCORE_LOGIT_MODE}: expected score {dist.expected:.4f}",
                       "mode": SCORE_LOGIT_MODE, "expected_score": dist.expected, "probs": list(dist.probs)}
            yield i, ChatResult(text=json.dumps(verdict), finish_reason="score_logit")
