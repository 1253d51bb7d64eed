"""Device mesh from config: axes (data, fsdp, tensor), sizes auto-filled for any device count."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

MESH_AXES = ("data", "fsdp", "tensor")


def resolve_mesh_shape(shape: Sequence[int] | Mapping[str, int], num_devices: int) -> tuple[int, ...]:
    """Fills one -1 entry (default: fsdp) so the product equals `num_devices`.

    `shape` is (data, fsdp, tensor) or a mapping with those keys; missing keys are -1 for fsdp and 1 otherwise.
    """
    if isinstance(shape, Mapping):
        unknown = set(shape) - set(MESH_AXES)
        if unknown:
            raise ValueError(f"mesh: unknown axes {sorted(unknown)}; expected {MESH_AXES}")
        shape = tuple(int(shape.get(a, -1 if a == "fsdp" else 1)) for a in MESH_AXES)
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(MESH_AXES):
        raise ValueError(f"mesh shape {shape}: expected {len(MESH_AXES)} sizes for {MESH_AXES}")
    free = [i for i, s in enumerate(shape) if s == -1]
    if len(free) > 1:
        raise ValueError(f"mesh shape {shape}: at most one size may be -1")
    fixed = math.prod(s for s in shape if s != -1)
    if free:
        if num_devices % fixed:
            raise ValueError(f"mesh shape {shape}: {num_devices} devices are not divisible by {fixed}")
        shape = tuple(num_devices // fixed if s == -1 else s for s in shape)
    if math.prod(shape) != num_devices:
        raise ValueError(f"mesh shape {dict(zip(MESH_AXES, shape))} needs {math.prod(shape)} devices, "
                         f"found {num_devices}")
    return shape


def make_mesh(shape: Sequence[int] | Mapping[str, int] = (1, -1, 1), devices=None) -> Mesh:
    """Builds a mesh with Auto axis types (the model annotates logical axes; XLA propagates)."""
    devices = jax.devices() if devices is None else list(devices)
    sizes = resolve_mesh_shape(shape, len(devices))
    try:
        return jax.make_mesh(sizes, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES),
                             devices=devices)
    except (ValueError, NotImplementedError):
        # Device sets jax cannot lay out physically (e.g. a subset): use the given order.
        return Mesh(np.asarray(devices).reshape(sizes), MESH_AXES,
                    axis_types=(AxisType.Auto,) * len(MESH_AXES))
