"""A judge served by jaxwrite's own inference engine, in process (no HTTP).

`mode="generate"` (default) samples each verdict like the official evaluators do, with the request's
JSON schema (if any) enforced by constrained decoding. `mode="score_logit"` is a NON-OFFICIAL fast
mode: it forces `{"score": ` and reads the score distribution from one prefill (see
jaxwrite.infer.score_logit); its text is a verdict JSON whose reason states the mode, and its label says so.
"""
from __future__ import annotations

import json
from typing import Sequence

from jaxwrite.evals.judges import JUDGES, ChatRequest, ChatResult
from jaxwrite.infer import Engine, GenerationRequest, SamplingParams, ScoreReader, load_for_inference
from jaxwrite.infer.score_logit import MODE as SCORE_LOGIT_MODE

MODES = ("generate", "score_logit")


@JUDGES.register("local")
class LocalJudge:
    """Judge backed by an `Engine`; pass `engine=` or `model=DIR` (HF dir or jaxwrite checkpoint)."""

    def __init__(self, engine: Engine | None = None, model: str | None = None, mode: str = "generate",
                 max_batch: int = 32, name: str | None = None):
        if mode not in MODES:
            raise ValueError(f"judge mode '{mode}': expected one of {', '.join(MODES)}")
        if engine is None:
            if model is None:
                raise ValueError("LocalJudge needs engine= or model=DIR")
            loaded, tokenizer = load_for_inference(model)
            engine = Engine(loaded, tokenizer, max_batch=max_batch)
        self.engine = engine
        self.mode = mode
        self._name = name or model or "in-process model"
        self._reader = ScoreReader(engine) if mode == "score_logit" else None

    @property
    def label(self) -> str:
        kind = f"local[{SCORE_LOGIT_MODE}]" if self.mode == "score_logit" else "local"
        return f"{kind}:{self._name}"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        prompts: list[list[int] | None] = []
        errors: list[str | None] = []
        for req in requests:
            try:
                messages = [dict(m) for m in req.messages]
                if self._reader is not None:
                    prompts.append(self._reader.prompt_ids(messages))
                else:
                    prompts.append(self.engine.tokenizer.encode_chat(messages))
                errors.append(None)
            except Exception as err:  # a template error belongs to this request only
                prompts.append(None)
                errors.append(f"{type(err).__name__}: {err}")
        if self._reader is not None:
            return self._score_logit(prompts, errors)
        return self._generate(requests, prompts, errors)

    def _generate(self, requests, prompts, errors) -> list[ChatResult]:
        todo = [i for i, p in enumerate(prompts) if p is not None]
        gen = [GenerationRequest(prompts[i], SamplingParams(
            temperature=requests[i].temperature, top_p=requests[i].top_p, top_k=requests[i].top_k,
            max_new_tokens=requests[i].max_tokens, seed=requests[i].seed), requests[i].json_schema)
            for i in todo]
        results: list[ChatResult] = [ChatResult(text="", error=e) for e in errors]
        for completion in self.engine.stream(gen):
            i = todo[completion.request_index]
            if completion.error is not None:
                results[i] = ChatResult(text="", error=completion.error)
            else:
                results[i] = ChatResult(text=completion.text, finish_reason=completion.finish_reason)
        return results

    def _score_logit(self, prompts, errors) -> list[ChatResult]:
        results: list[ChatResult] = [ChatResult(text="", error=e) for e in errors]
        todo = [i for i, p in enumerate(prompts) if p is not None]
        for i in list(todo):
            try:
                self.engine.check(GenerationRequest(prompts[i]))
            except ValueError as err:
                results[i] = ChatResult(text="", error=str(err))
                todo.remove(i)
        for i, dist in zip(todo, self._reader.read([prompts[i] for i in todo]) if todo else []):
            verdict = {"score": dist.argmax,
                       "reason": f"{SCORE_LOGIT_MODE}: expected score {dist.expected:.4f}",
                       "mode": SCORE_LOGIT_MODE, "expected_score": dist.expected, "probs": list(dist.probs)}
            results[i] = ChatResult(text=json.dumps(verdict), finish_reason="score_logit")
        return results
