"""Rollouts through the inference engine: G samples per prompt with the think/answer protocol, turned
into RolloutSamples (for the rewards) and padded token arrays (for the policy update).

A sample may take several engine calls (partial rollouts, rl/partial.py): a `Trajectory` keeps its tokens
and, for each, the log-prob under the weights that sampled it (the engine's sample_logprobs), and a
continued sample is re-prefilled from its prompt and tokens so far under the weights of the call that
continues it. Its stop string is looked for in its whole text, so one split across two calls still ends it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from jaxwrite.infer import Completion, Engine, FinishReason, GenerationRequest, SamplingParams, find_stop
from jaxwrite.rl.repetition import dominant_script
from jaxwrite.rl.types import RolloutPrompt, RolloutSample
from jaxwrite.text import STOP_STRING, think_answer_base_prompt, think_answer_messages


@dataclasses.dataclass(frozen=True)
class RolloutSettings:
    """How a step samples: the engine's own SamplingParams (n = the group size, one shared prefill per
    prompt; each prompt's seed and the protocol's stop string are filled in per step) and the prompt
    template."""
    sampling: SamplingParams = SamplingParams(temperature=0.8, top_p=1.0, max_new_tokens=14_000, n=8)
    # "base": plain prompt ending in "<think>" (RL from a base model, LongWriter-Zero); "chat": the
    # protocol as a chat turn; "plain": "User: … Assistant:" with no protocol (the whole text is the answer,
    # for policies too small to have learnt the protocol, e.g. the tiny CPU recipe)
    template: str = "base"
    lang: str = "auto"                # "en" | "zh" | "auto" (dominant script of the prompt)
    stop: tuple[str, ...] | None = None   # stop strings; None = the protocol's (</answer>), none for plain

    @property
    def group_size(self) -> int:
        return self.sampling.n

    @property
    def protocol(self) -> bool:
        return self.template != "plain"

    @property
    def stops(self) -> tuple[str, ...]:
        if self.stop is not None:
            return self.stop
        return (STOP_STRING,) if self.protocol else ()


def prompt_ids(tokenizer, text: str, template: str, lang: str = "auto") -> list[int]:
    """Token ids of a writing request rendered with a rollout template (see RolloutSettings)."""
    if lang == "auto":
        lang = "zh" if dominant_script(text) == "zh" else "en"
    if template == "base":
        return tokenizer.encode(think_answer_base_prompt(text, lang))
    if template == "chat":
        return tokenizer.encode_chat(think_answer_messages(text, lang), add_generation_prompt=True)
    if template == "plain":
        return tokenizer.encode(f"User: {text}\nAssistant:")
    raise ValueError(f"rollout template '{template}': expected base, chat or plain")


def render_prompt(tokenizer, prompt: RolloutPrompt, settings: RolloutSettings) -> list[int]:
    """Token ids of the rollout prompt for one RL prompt."""
    return prompt_ids(tokenizer, prompt.text, settings.template, settings.lang)


@dataclasses.dataclass
class Trajectory:
    """One sample, possibly generated over several engine calls."""
    ids: list[int] = dataclasses.field(default_factory=list)     # trained on; the EOS that ended it appended
    logps: list[float] = dataclasses.field(default_factory=list)  # [len(ids)] sampler log-probs
    finish: str | None = None          # a FinishReason once done; None while parked
    stop_string: str | None = None
    eos: bool = False                  # ids ends with the sampled EOS
    text: str = ""
    segments: int = 0                  # engine calls that extended it
    first_version: int = -1            # policy version (rollouts trained so far) of its first tokens
    seconds: float = 0.0               # engine wall time of its segments

    @property
    def done(self) -> bool:
        return self.finish is not None

    @property
    def num_tokens(self) -> int:
        """Generated tokens, the EOS not counted (as the engine counts them)."""
        return len(self.ids) - self.eos


@dataclasses.dataclass
class Group:
    """The G samples of one prompt. `position` is the prompt's place in the run's prompt stream: it
    picks the prompt and seeds its samples."""
    position: int
    prompt: RolloutPrompt
    prompt_ids: list[int]
    samples: list[Trajectory]
    rewards: np.ndarray | None = None   # [G, R] raw, once every sample is done and scored

    @property
    def done(self) -> bool:
        return all(t.done for t in self.samples)

    @property
    def started(self) -> bool:
        return any(t.segments for t in self.samples)


def rollout_samples(group: Group, settings: RolloutSettings) -> list[RolloutSample]:
    """What the rewards and metrics read of a finished group."""
    return [RolloutSample(text=t.text, finish_reason=t.finish, num_tokens=t.num_tokens, stop_string=t.stop_string,
                          think_prefilled=settings.template == "base", protocol=settings.protocol)
            for t in group.samples]


# (position, segment, sample index) -> the engine seed of that call
SeedFn = Callable[[int, int, int], int]


def advance(engine: Engine, groups: Sequence[Group], settings: RolloutSettings, budget: int, version: int,
            seed_of: SeedFn) -> int:
    """Extends every unfinished sample of `groups` by at most `budget` new tokens in one engine call
    (continuous batching over all of them); returns the tokens generated. A group not started yet is
    one request of n = G samples sharing a prefill; a parked sample is one request from its prompt and
    tokens so far. A sample ends on EOS, its stop string or the max_new_tokens cap (or the context)."""
    max_new = settings.sampling.max_new_tokens
    requests, targets = [], []
    for group in groups:
        if not group.started:
            params = dataclasses.replace(settings.sampling, n=len(group.samples), stop=settings.stops,
                                         max_new_tokens=min(budget, max_new), seed=seed_of(group.position, 0, 0))
            requests.append(GenerationRequest(group.prompt_ids, params, sample_logprobs=True))
            targets.append((group, None))
            continue
        for g, t in enumerate(group.samples):
            if t.done:
                continue
            room = min(max_new - len(t.ids), engine.max_context - 1 - len(group.prompt_ids) - len(t.ids))
            if room <= 0:
                t.finish = FinishReason.LENGTH
                continue
            params = dataclasses.replace(settings.sampling, n=1, stop=settings.stops, max_new_tokens=min(budget, room),
                                         seed=seed_of(group.position, t.segments, g))
            requests.append(GenerationRequest(group.prompt_ids + t.ids, params, sample_logprobs=True))
            targets.append((group, g))
    results: list[list[Completion]] = engine.generate(requests) if requests else []
    generated = 0
    for (group, index), completions in zip(targets, results):
        for c in completions:
            if c.error:
                raise RuntimeError(f"rollout generation failed: {c.error}")
            t = group.samples[c.sample_index if index is None else index]
            _extend(t, c, engine, settings, version,
                    room_left=engine.max_context - 1 - len(group.prompt_ids) - len(t.ids) - len(c.token_ids))
            generated += len(c.token_ids)
    return generated


def _extend(t: Trajectory, c: Completion, engine: Engine, settings: RolloutSettings, version: int,
            room_left: int) -> None:
    """Appends one engine call's output to a trajectory and decides whether the sample is done."""
    before = len(t.ids)
    # The sampled EOS ends the text but is not in token_ids; the policy chose it, so train on it.
    t.ids += list(c.token_ids) + ([c.end_token] if c.end_token is not None else [])
    t.logps += list(c.sample_logprobs)
    t.eos = c.end_token is not None
    t.segments += 1
    t.seconds += c.seconds
    if t.first_version < 0:
        t.first_version = version
    if t.segments == 1:                  # the engine saw the whole text: its stop-string cut holds
        t.text, t.stop_string = c.text, c.matched_stop
    else:
        _whole_text(t, engine.tokenizer, settings.stops, before)
    if c.finish_reason == FinishReason.STOP or t.stop_string is not None:
        t.finish = FinishReason.STOP
    elif len(t.ids) >= settings.sampling.max_new_tokens or room_left <= 0:
        t.finish = FinishReason.LENGTH
    # else: the call's budget ran out first; the sample stays parked


def _whole_text(t: Trajectory, tokenizer, stops: tuple[str, ...], boundary: int) -> None:
    """Text of a continued sample from all its tokens, cut at its first stop string; a stop string
    that began before the last call (which only saw its own text) also ends the sample there."""
    body = t.ids[:-1] if t.eos else t.ids
    text = tokenizer.decode(body)
    at, which = find_stop(text, stops, 0)
    if at < 0:
        t.text, t.stop_string = text, None
        return
    # The fewest tokens whose text holds the stop (as the engine keeps them when it finds one itself).
    for end in range(max(boundary, 1), len(body) + 1):
        if find_stop(tokenizer.decode(body[:end]), stops, 0)[0] >= 0:
            break
    t.ids, t.logps, t.eos = body[:end], t.logps[:end], False
    t.text, t.stop_string = text[:at], which


def length_bucket(n: int, multiple: int = 64, per_octave: int = 4) -> int:
    """Row length rounded up to one of `per_octave` evenly spaced sizes per power of two (>= multiple).

    Updates compile once per size, so sizes must be few; but a whole power of two pads a 300-token row
    to 512 and spends 40 % of the update (and of every log-prob pass) on padding. Quarter-octave steps
    waste at most a quarter, with at most four compiled sizes per doubling of the row length.
    """
    if n <= multiple:
        return multiple
    octave = multiple
    while octave * 2 < n:
        octave *= 2
    step = max(multiple, octave // per_octave)
    return -(-n // step) * step


@dataclasses.dataclass
class Rollout:
    """One step's samples: groups[p][g] answers prompts[p]; token arrays are prompt-major rows."""
    prompts: list[RolloutPrompt]
    groups: list[list[RolloutSample]]
    prompt_ids: list[list[int]]             # [P] token ids of each rendered prompt
    completion_ids: list[list[int]]         # [P*G] generated ids trained on (EOS appended when it ended the text)
    generated_tokens: int
    sampler_logps: list[list[float]] | None = None   # [P*G] the sampler's log-prob of each completion id


def rollout_arrays(rollout: Rollout, pad_id: int, mask_truncated: bool) -> dict:
    """Padded rows (prompt + completion) with next-token targets and a completion-only loss mask.

    tokens, targets, loss_mask, attention_mask: [P*G, T]; sample_mask: [P*G]; with sampler log-probs,
    logp_sampler [P*G, T] (each completion token's at the position that predicts it, 0 elsewhere). The
    rows' advantages are computed in the update step from their group rewards (algo_core.group_rows).
    """
    group_size = len(rollout.groups[0])
    rows = [(rollout.prompt_ids[i // group_size], c) for i, c in enumerate(rollout.completion_ids)]
    length = length_bucket(max(len(p) + len(c) for p, c in rows))
    n = len(rows)
    tokens = np.full((n, length), pad_id, np.int32)
    loss_mask = np.zeros((n, length), np.float32)
    attention = np.zeros((n, length), bool)
    logp_sampler = np.zeros((n, length), np.float32)
    for r, (p, c) in enumerate(rows):
        seq = p + c
        tokens[r, :len(seq)] = seq
        attention[r, :len(seq)] = True
        # Position t predicts token t+1: completion tokens are predicted from len(p)-1 .. len(seq)-2.
        loss_mask[r, len(p) - 1:len(seq) - 1] = 1.0
        if rollout.sampler_logps is not None:
            logp_sampler[r, len(p) - 1:len(seq) - 1] = rollout.sampler_logps[r]
    targets = np.concatenate([tokens[:, 1:], np.full((n, 1), pad_id, np.int32)], axis=1)
    samples = [s for g in rollout.groups for s in g]
    sample_mask = np.array([0.0 if (mask_truncated and s.truncated) else 1.0 for s in samples], np.float32)
    out = {"tokens": tokens, "targets": targets, "loss_mask": loss_mask, "attention_mask": attention,
           "sample_mask": sample_mask}
    if rollout.sampler_logps is not None:
        out["logp_sampler"] = logp_sampler
    return out


def groups_rollout(groups: Sequence[Group], settings: RolloutSettings, generated_tokens: int) -> Rollout:
    """The Rollout of finished groups (their samples, ids and sampler log-probs, prompt-major)."""
    return Rollout([g.prompt for g in groups], [rollout_samples(g, settings) for g in groups],
                   [g.prompt_ids for g in groups], [t.ids for g in groups for t in g.samples], generated_tokens,
                   [t.logps for g in groups for t in g.samples])
