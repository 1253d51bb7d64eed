"""TPU chips and pod-slice topologies by name, for compiling a step ahead of time on a CPU host.

A topology is named as Cloud TPU names slices (`v5p-128`: 64 chips, the number counts TensorCores on
v4 / v5p and chips on v5e / v6e) or as the TPU compiler names it (`v5p:4x4x4`, `v6e:4x4`). Chip
figures are the vendors' published ones: dense bf16 peak FLOP/s and HBM bandwidth per chip; HBM
capacity is what a program may use per chip, which the TPU compiler checks at compile time.
"""
from __future__ import annotations

import dataclasses
import math

from jaxwrite.common import InputError


@dataclasses.dataclass(frozen=True)
class Chip:
    name: str
    hbm_bytes: int              # HBM a program may use on one chip
    peak_flops: float           # dense bf16 FLOP/s per chip
    hbm_bandwidth: float        # bytes/s per chip
    cores_per_chip: int         # how the cloud name counts: TensorCores (v4, v5p) or chips (v5e, v6e)
    compiler_prefix: str        # the generation as the TPU compiler's topology names spell it
    ici_bandwidth: float = 0.0  # bytes/s per chip over the inter-chip interconnect (published Gbps / 8)


GIB = 2 ** 30
CHIPS: dict[str, Chip] = {
    # ICI per chip as Cloud TPU publishes it: v4 2,400, v5e 1,600, v5p 4,800, v6e 3,584 Gbps.
    "v4": Chip("v4", 32 * GIB, 275e12, 1.2e12, 2, "v4", 300e9),
    "v5e": Chip("v5e", 16 * GIB, 197e12, 8.19e11, 1, "v5e", 200e9),
    # v5p: the compiler reports 95.74 GiB available per chip (its out-of-memory message).
    "v5p": Chip("v5p", int(95.74 * GIB), 459e12, 2.765e12, 2, "v5p", 600e9),
    "v6e": Chip("v6e", 32 * GIB, 918e12, 1.64e12, 1, "v6e", 448e9),
}

# Chips in a slice -> physical layout (3-D torus for v4 / v5p, 2-D for v5e / v6e).
_LAYOUT_3D = {1: "1x1x1", 4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8",
              256: "4x8x8", 512: "8x8x8"}
_LAYOUT_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}


@dataclasses.dataclass(frozen=True)
class Topology:
    name: str                   # as given
    chip: Chip
    compiler_name: str          # e.g. "v5p:4x4x4"
    num_chips: int


def _known_names() -> list[str]:
    names = []
    for chip in CHIPS.values():
        layouts = _LAYOUT_3D if chip.cores_per_chip == 2 else _LAYOUT_2D
        names += [f"{chip.name}-{n * chip.cores_per_chip}" for n in layouts]
    return names


def parse_topology(name: str) -> Topology:
    """`v5p-128` or `v5p:4x4x4` -> Topology; a one-line InputError naming the accepted forms otherwise."""
    expected = (f"expected a Cloud TPU slice name ({', '.join(_known_names()[:4])}, ...; generations "
                f"{', '.join(CHIPS)}) or a compiler topology such as v5p:4x4x4")
    if ":" in name:
        gen, _, dims = name.partition(":")
        chip = CHIPS.get(gen)
        try:
            sizes = [int(d) for d in dims.split("x")]
        except ValueError:
            sizes = []
        want = 3 if chip is not None and chip.cores_per_chip == 2 else 2
        if chip is None or len(sizes) != want or min(sizes) < 1:
            raise InputError(f"unknown topology '{name}'; {expected}", field="--topology")
        return Topology(name, chip, f"{chip.compiler_prefix}:{dims}", math.prod(sizes))
    gen, _, count = name.rpartition("-")
    chip = CHIPS.get(gen)
    if chip is None or not count.isdigit() or int(count) % chip.cores_per_chip:
        raise InputError(f"unknown topology '{name}'; {expected}", field="--topology")
    chips = int(count) // chip.cores_per_chip
    layouts = _LAYOUT_3D if chip.cores_per_chip == 2 else _LAYOUT_2D
    if chips not in layouts:
        raise InputError(f"unknown topology '{name}'; {expected}", field="--topology")
    return Topology(name, chip, f"{chip.compiler_prefix}:{layouts[chips]}", chips)


def topology_devices(topology: Topology) -> list:
    """Compile-only devices of the slice (needs libtpu; no TPU hardware)."""
    from jax.experimental import topologies
    options = {}
    if topology.num_chips == 1:
        options["chips_per_host_bounds"] = (1, 1, 1)   # the default host is 2x2 chips
    if topology.chip.name == "v4":
        options["chip_config_name"] = "megacore"      # one device per chip (its two cores fused), as v5p
    return list(topologies.get_topology_desc(topology_name=topology.compiler_name, platform="tpu",
                                             **options).devices)
