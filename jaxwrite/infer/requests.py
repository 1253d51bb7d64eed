"""What the engine takes and gives per request: GenerationRequest in, Completion out (one per sample),
and the host-side state of a sample being decoded (its tokens, text, stop strings, logprobs)."""
from __future__ import annotations

import dataclasses
import enum
import time
from typing import Any, Sequence

import numpy as np

from jaxwrite.infer.sampling import SamplingParams
from jaxwrite.infer.stops import find_stop, safe_length
from jaxwrite.text import StreamDecoder


@dataclasses.dataclass
class GenerationRequest:
    """Token ids of a prompt, how to sample it, and optionally a JSON schema its output must follow
    ("json_object": any JSON object). logprobs: None, or k >= 0 to return each generated token's
    log-probability and the top k alternatives (at most steps.TOP_LOGPROBS). sample_logprobs: return each
    sampled token's log-prob under the distribution it was drawn from (steps.Logprobs.sampled), e.g. the
    behaviour policy's log-probs an RL update weighs its tokens against."""
    prompt_ids: Sequence[int]
    params: SamplingParams = SamplingParams()
    json_schema: dict | str | None = None
    logprobs: int | None = None
    sample_logprobs: bool = False
    # The compiled schema, set by Engine.check (so the decode thread never compiles, and a cache
    # eviction cannot pull a table from under a live row).
    constraint: Any = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass
class TokenLogprob:
    """A generated token's log-probability under the model, and the top alternatives (token, logprob)."""
    token: int
    logprob: float
    top: list[tuple[int, float]]


class FinishReason(enum.StrEnum):
    """Why a sample ended (the OpenAI API's names; compares equal to the plain strings)."""
    STOP = "stop"       # EOS, a stop string, or a constrained schema completed
    LENGTH = "length"   # max_new_tokens reached
    ERROR = "error"     # the request failed; Completion.error says why
    CANCELLED = "cancelled"   # the feed cancelled the request (e.g. its HTTP client left); text so far


@dataclasses.dataclass
class Completion:
    """One sample; finish_reason is a FinishReason."""
    request_index: int
    sample_index: int
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    prompt_tokens: int
    error: str | None = None
    matched_stop: str | None = None   # the stop string that ended the sample (excluded from text)
    logprobs: list[TokenLogprob] | None = None   # one per token_ids entry, when the request asked
    # When the request asked (sample_logprobs): one per token_ids entry, then one for the EOS that ended
    # the sample if one did (end_token), each under the distribution the token was sampled from.
    sample_logprobs: list[float] | None = None
    end_token: int | None = None      # the EOS (or stop_token_ids) id that ended the sample (not in token_ids)
    seconds: float = 0.0              # wall time from the sample's admission into the batch to its end


class SampleState:
    """Host-side view of one sample: its tokens, text, stop strings and finish reason."""

    def __init__(self, request_index: int, sample_index: int, request: GenerationRequest, prompt_tokens: int,
                 tokenizer, stream: bool):
        self.request_index, self.sample_index = request_index, sample_index
        self.prompt_tokens = prompt_tokens
        self.request = request
        self.stops = request.params.stop
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.logprobs: list[TokenLogprob] | None = [] if request.logprobs is not None else None
        self.sample_logprobs: list[float] | None = [] if request.sample_logprobs else None
        self.end_token: int | None = None
        self.started = time.perf_counter()
        self.finished = False
        self.reason = FinishReason.LENGTH
        # Incremental text only when something reads it before the end.
        self._decoder = StreamDecoder(tokenizer) if (self.stops or stream) else None
        self.text = ""
        self._hit_stop: str | None = None
        self._searched = 0
        self._sent = 0

    def add(self, tokens: list[int], eos: np.ndarray, device_done: bool,
            logprobs: list[TokenLogprob] | None = None, sampled: Sequence[float] | None = None) -> None:
        params = self.request.params
        for i, t in enumerate(tokens):
            if self.sample_logprobs is not None and sampled is not None:
                self.sample_logprobs.append(float(sampled[i]))
            if (t in eos and not params.ignore_eos) or t in params.stop_token_ids:
                self.finished, self.reason, self.end_token = True, FinishReason.STOP, int(t)
                return
            self.ids.append(t)
            if self.logprobs is not None and logprobs is not None:
                self.logprobs.append(logprobs[i])
            if self._decoder is not None:
                self.text += self._decoder.push(t)
                if self.stops:
                    # Before min_tokens are out a stop string does not count (vLLM's rule: a match must
                    # end in a token past the first min_tokens).
                    at, which = (find_stop(self.text, self.stops, self._searched)
                                 if len(self.ids) > params.min_tokens else (-1, None))
                    self._searched = len(self.text)
                    if at >= 0:
                        self._stop_at(at, which)
                        return
        if device_done:
            self.finished = True   # the budget ran out (EOS returned above)

    def _stop_at(self, at: int, which: str | None) -> None:
        self.text = self.text[:at]
        self.finished, self.reason, self._hit_stop = True, FinishReason.STOP, which

    def pending_text(self, final: bool = False) -> str:
        end = len(self.text) if final else safe_length(self.text, self.stops)
        delta = self.text[self._sent:end]
        self._sent = max(self._sent, end)
        return delta

    def completion(self) -> Completion:
        if self._decoder is None:
            self.text = self.tokenizer.decode(self.ids)
        elif not self._hit_stop:
            self.text += self._decoder.flush()
            at, which = find_stop(self.text, self.stops, self._searched)
            if at >= 0:
                self._stop_at(at, which)
        return Completion(self.request_index, self.sample_index, self.text, list(self.ids), self.reason,
                          self.prompt_tokens, matched_stop=self._hit_stop,
                          logprobs=list(self.logprobs) if self.logprobs is not None else None,
                          sample_logprobs=list(self.sample_logprobs) if self.sample_logprobs is not None else None,
                          end_token=self.end_token, seconds=time.perf_counter() - self.started)


def host_logprobs(lp, first_step: bool = False):
    """A device steps.Logprobs (or None) on the host, each field as the device had it (None when not
    computed): chosen / sampled [batch, steps], top_logprob / top_token [batch, steps, K]; first_step:
    the arrays have no steps axis yet."""
    if lp is None:
        return None

    def host(x):
        if x is None:
            return None
        x = np.asarray(x)
        return x[:, None] if first_step else np.moveaxis(x, 0, 1)   # first step: no leading steps axis
    return dataclasses.replace(lp, **{f.name: host(getattr(lp, f.name)) for f in dataclasses.fields(lp)})
