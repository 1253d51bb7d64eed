"""GRPO rollout samples a person can read: RL runs are debugged by reading what the policy wrote.

Every `rl.samples_every` rollouts, the whole groups of the rollout's first `rl.samples_prompts` prompts go
to <workdir>/rollout_samples.jsonl, one line per sample:

  {"rollout": 12, "step": 25, "prompt_id": "lc-3", "prompt": "...", "target_words": [20, 60],
   "sample": 0, "plan": "...", "answer": "..." | null, "well_formed": true, "problems": [],
   "finish_reason": "stop", "tokens": 87, "answer_words": 41,
   "rewards": {"length": 1.0, "format": 1.0}, "advantage": 0.83}

`step` is the first optimiser step trained on that rollout; `advantage` is the sample's group advantage
under the run's estimator and reward weights (what the update step uses). A resumed run regenerates
the rollouts after its checkpoint; the ones already in the file are kept, not written twice.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from jaxwrite.common import append_jsonl, scan_jsonl
from jaxwrite.common.jsonl import repair_torn_tail
from jaxwrite.rl.types import RolloutPrompt, RolloutSample

SAMPLES_FILE = "rollout_samples.jsonl"


class RolloutSampleLog:
    def __init__(self, workdir: str, every: int, prompts_per_save: int):
        self.path = os.path.join(workdir, SAMPLES_FILE)
        self.every, self.prompts_per_save = int(every), int(prompts_per_save)
        self._written: set[int] = set()
        if os.path.exists(self.path):
            repair_torn_tail(self.path)   # a line cut by a kill is dropped and its rollout written again
            self._written = {int(rec["rollout"]) for _, rec, err in scan_jsonl(self.path)
                             if err is None and "rollout" in rec}

    def due(self, rollout_index: int) -> bool:
        return self.every > 0 and rollout_index % self.every == 0 and rollout_index not in self._written

    def write(self, rollout_index: int, step: int, prompts: Sequence[RolloutPrompt],
              groups: Sequence[Sequence[RolloutSample]], rewards: np.ndarray, reward_names: Sequence[str],
              advantages: np.ndarray) -> int:
        """Appends the chosen groups of one rollout; rewards [P, G, R], advantages [P, G]. Returns lines written."""
        if not self.due(rollout_index):
            return 0
        count = len(prompts) if self.prompts_per_save <= 0 else min(self.prompts_per_save, len(prompts))
        lines = 0
        for p in range(count):
            prompt = prompts[p]
            for g, sample in enumerate(groups[p]):
                parsed = sample.parsed
                append_jsonl(self.path, {
                    "rollout": int(rollout_index), "step": int(step), "prompt_id": prompt.id, "prompt": prompt.text,
                    "target_words": [int(prompt.lower), int(prompt.upper)], "sample": g,
                    "plan": parsed.plan, "answer": sample.answer, "well_formed": bool(parsed.well_formed),
                    "problems": list(parsed.problems), "finish_reason": sample.finish_reason,
                    "tokens": int(sample.num_tokens), "answer_words": int(sample.answer_words),
                    "rewards": {name: float(rewards[p, g, r]) for r, name in enumerate(reward_names)},
                    "advantage": float(advantages[p, g])})
                lines += 1
        self._written.add(int(rollout_index))
        return lines
