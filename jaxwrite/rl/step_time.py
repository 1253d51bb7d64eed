"""Where a GRPO step's time goes, from a run's metrics.jsonl: the table the quickstart report shows.

A step is the trainer's wait for its batch (time/data_s: the whole rollout when synchronous, the part not
hidden behind earlier updates when asynchronous) plus the update (time/update_s). The rollout's own parts
(weight sync, prefill, decode, each reward with RM scoring, reference and old log-probs) are its work,
wherever it ran; with rl.max_staleness > 0 it ran beside the update, so the parts can add up to more than
the wait. The first logged step compiles and is left out.
"""
from __future__ import annotations

import os

import numpy as np

from jaxwrite.common import read_jsonl

STEP_PARTS = (("step: wait for the rollout", "time/data_s"), ("step: update", "time/update_s"))
ROLLOUT_PARTS = (("rollout: weight sync", "time/weight_sync_s"), ("rollout: prefill", "time/prefill_s"),
                 ("rollout: decode", "time/decode_s"), ("rollout: reference log-probs", "time/logp_ref_s"),
                 ("update: old log-probs", "time/logp_old_s"))
FIGURES = (("rollout tokens/s", "rollout/tokens_per_sec"),
           ("rollout tokens/s per chip", "rollout/tokens_per_sec_per_chip"),
           ("slowest sample (s)", "rollout/slowest_sample_s"),
           ("decode row-steps on finished rows (long-tail waste)", "rollout/finished_row_share"),
           ("truncated share", "truncated_frac"), ("staleness (updates, mean)", "rollout/staleness_mean"),
           ("sampler vs trainer KL (k3, mean)", "sampler/kl"),
           ("sampler vs trainer max |log-prob difference|", "sampler/logp_diff_max"))


def step_time_rows(metrics_jsonl: str | os.PathLike) -> tuple[list[list], list[list]]:
    """([part, mean seconds per step, share], [figure, mean per step]) over the logged steps after the
    first; a part or figure the run did not log is left out. A step part's share is of the step, a
    rollout part's of the rollout's own time (its weight sync and production)."""
    records = sorted((rec for _, rec in read_jsonl(metrics_jsonl, required=("step",))), key=lambda r: r["step"])
    records = records[1:] or records

    def mean(key):
        values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
        return float(np.mean(values)) if values else None

    step = sum(mean(k) or 0.0 for _, k in STEP_PARTS)
    rollout = (mean("rollout/seconds") or 0.0) + (mean("time/weight_sync_s") or 0.0)
    rewards = sorted({k for r in records for k in r if k.startswith("time/reward/")})
    parts = list(STEP_PARTS) + list(ROLLOUT_PARTS[:3]) + [
        (f"rollout: reward {k[len('time/reward/'):-len('_s')]}", k) for k in rewards] + list(ROLLOUT_PARTS[3:])
    times = []
    for label, key in parts:
        value = mean(key)
        if value is not None:
            whole = rollout if label.startswith("rollout:") else step
            times.append([label, value, value / whole if whole else None])
    figures = [[label, mean(k)] for label, k in FIGURES if mean(k) is not None]
    return times, figures
