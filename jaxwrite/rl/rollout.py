"""Rollouts through the inference engine: G samples per prompt with the think/answer protocol, turned
into RolloutSamples (for the rewards) and padded token arrays (for the policy update)."""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from jaxwrite.infer import Completion, Engine, GenerationRequest, SamplingParams
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

    @property
    def group_size(self) -> int:
        return self.sampling.n


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
class Rollout:
    """One step's samples: groups[p][g] answers prompts[p]; token arrays are prompt-major rows."""
    prompts: list[RolloutPrompt]
    groups: list[list[RolloutSample]]
    prompt_ids: list[list[int]]             # [P] token ids of each rendered prompt
    completion_ids: list[list[int]]         # [P*G] generated ids trained on (EOS appended when it ended the text)
    generated_tokens: int


def generate_rollout(engine: Engine, prompts: Sequence[RolloutPrompt], settings: RolloutSettings,
                     seed: int) -> Rollout:
    """Samples `group_size` completions per prompt; all samples of a prompt share one prefill."""
    tok = engine.tokenizer
    prompt_ids = [render_prompt(tok, p, settings) for p in prompts]
    protocol = settings.template != "plain"
    params = [dataclasses.replace(settings.sampling, seed=(seed * 1_000_003 + i) % (2 ** 62),
                                  stop=(STOP_STRING,) if protocol else ())
              for i in range(len(prompts))]
    results: list[list[Completion]] = engine.generate(
        [GenerationRequest(ids, p) for ids, p in zip(prompt_ids, params)])
    eos = sorted(tok.eos_ids)[0] if tok.eos_ids else None
    groups, completion_ids, total = [], [], 0
    for samples in results:
        group = []
        for c in samples:
            if c.error:
                raise RuntimeError(f"rollout generation failed: {c.error}")
            ids = list(c.token_ids)
            # The sampled EOS ends the text but is not in token_ids; the policy chose it, so train on it.
            if c.finish_reason == "stop" and c.matched_stop is None and eos is not None:
                ids.append(eos)
            completion_ids.append(ids)
            total += len(c.token_ids)
            group.append(RolloutSample(text=c.text, finish_reason=c.finish_reason, num_tokens=len(c.token_ids),
                                       stop_string=c.matched_stop, think_prefilled=settings.template == "base",
                                       protocol=protocol))
        groups.append(group)
    return Rollout(list(prompts), groups, prompt_ids, completion_ids, total)


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


def rollout_arrays(rollout: Rollout, pad_id: int, mask_truncated: bool) -> dict:
    """Padded rows (prompt + completion) with next-token targets and a completion-only loss mask.

    tokens, targets, loss_mask, attention_mask: [P*G, T]; sample_mask: [P*G]. The rows' advantages are
    computed in the update step from their group rewards (jaxwrite.rl.algo_core.group_rows).
    """
    group_size = len(rollout.groups[0])
    rows = [(rollout.prompt_ids[i // group_size], c) for i, c in enumerate(rollout.completion_ids)]
    length = length_bucket(max(len(p) + len(c) for p, c in rows))
    n = len(rows)
    tokens = np.full((n, length), pad_id, np.int32)
    loss_mask = np.zeros((n, length), np.float32)
    attention = np.zeros((n, length), bool)
    for r, (p, c) in enumerate(rows):
        seq = p + c
        tokens[r, :len(seq)] = seq
        attention[r, :len(seq)] = True
        # Position t predicts token t+1: completion tokens are predicted from len(p)-1 .. len(seq)-2.
        loss_mask[r, len(p) - 1:len(seq) - 1] = 1.0
    targets = np.concatenate([tokens[:, 1:], np.full((n, 1), pad_id, np.int32)], axis=1)
    samples = [s for g in rollout.groups for s in g]
    sample_mask = np.array([0.0 if (mask_truncated and s.truncated) else 1.0 for s in samples], np.float32)
    return {"tokens": tokens, "targets": targets, "loss_mask": loss_mask, "attention_mask": attention,
            "sample_mask": sample_mask}
