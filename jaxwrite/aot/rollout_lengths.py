"""Answer-length distributions for the GRPO step-time estimate (`jaxwrite compile --estimate --lengths`):
a stated parametric one, or the lengths a run actually sampled (its rollout_samples.jsonl)."""
from __future__ import annotations

import json
import math
import os
import re

import numpy as np

from jaxwrite.common import InputError

_PARAM = re.compile(r"^(\w+)=([\d.eE+]+)$")


def sample_lengths(spec: str, max_new: int, count: int, seed: int = 0) -> np.ndarray:
    """`count` answer lengths (tokens, 1..max_new; max_new = truncated) from `spec`:
    lognormal:median=M,sigma=S | uniform:LO-HI | fixed:N | a run's rollout_samples.jsonl (or its workdir),
    resampled with replacement."""
    rng = np.random.default_rng(seed)
    kind, _, rest = spec.partition(":")
    if not rest:
        return rng.choice(_run_lengths(spec), size=count, replace=True).clip(1, max_new)
    try:
        if kind == "lognormal":
            params = dict(_PARAM.match(p).groups() for p in rest.split(","))
            out = rng.lognormal(math.log(float(params["median"])), float(params["sigma"]), count)
        elif kind == "uniform":
            lo, hi = (int(x) for x in rest.split("-"))
            out = rng.integers(lo, hi + 1, count)
        elif kind == "fixed":
            out = np.full(count, int(rest))
        else:
            raise ValueError
    except (ValueError, KeyError, AttributeError):
        raise InputError(f"unknown length distribution '{spec}'; expected lognormal:median=M,sigma=S, "
                         "uniform:LO-HI, fixed:N or a run's rollout_samples.jsonl", field="--lengths") from None
    return np.asarray(out).round().astype(np.int64).clip(1, max_new)


def _run_lengths(path: str) -> np.ndarray:
    if os.path.isdir(path):
        path = os.path.join(path, "rollout_samples.jsonl")
    if not os.path.isfile(path):
        raise InputError("not a length distribution nor a run's rollout samples file", path=path,
                         field="--lengths")
    tokens = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                tokens.append(int(json.loads(line)["tokens"]))
            except (ValueError, KeyError, TypeError):
                raise InputError("expected a rollout sample with an integer 'tokens'", path=path, line=number,
                                 field="tokens") from None
    if not tokens:
        raise InputError("no rollout samples", path=path, field="--lengths")
    return np.asarray(tokens)
