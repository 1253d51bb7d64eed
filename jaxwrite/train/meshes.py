"""Named hardware targets for the real-size recipes: mesh shape and per-chip batch hints.

A recipe file takes the target as its `get_config` argument (`configs/rm_qwen2.5_72b.py:v5p-128`).
Sizes follow the cloud names: TPU v5p-N has N/2 chips (N counts TensorCores), v6e-N has N chips.
"""
from __future__ import annotations

import dataclasses

from jaxwrite.common import InputError


@dataclasses.dataclass(frozen=True)
class Target:
    devices: int
    mesh: tuple[int, int, int]      # (data, fsdp, tensor)
    description: str


TARGETS: dict[str, Target] = {
    "v5p-32": Target(16, (1, 16, 1), "TPU v5p, 16 chips (95 GB HBM each)"),
    "v5p-64": Target(32, (1, 32, 1), "TPU v5p, 32 chips"),
    "v5p-128": Target(64, (1, 16, 4), "TPU v5p, 64 chips; tensor parallel 4 for 72B activations"),
    "v4-32": Target(16, (1, 16, 1), "TPU v4, 16 chips (32 GB HBM each)"),
    "v6e-16": Target(16, (1, 16, 1), "TPU v6e (Trillium), 16 chips (32 GB HBM each)"),
    "v6e-64": Target(64, (1, 16, 4), "TPU v6e, 64 chips"),
    "v6e-256": Target(256, (4, 16, 4), "TPU v6e, 256 chips"),
    "gpu": Target(1, (1, 1, 1), "one GPU (H100/H200 class)"),
}


def target(name: str, allowed: tuple[str, ...]) -> Target:
    if name not in allowed:
        raise InputError(f"unknown hardware target '{name}'; this recipe supports: {', '.join(allowed)}")
    return TARGETS[name]
