"""What each log-prob implementation's value + gradients needs in temporary HBM on one TPU chip, as the
TPU compiler reports it (compile-only devices; `python benchmarks/logprob_memory.py`, figures in
docs/BENCHMARKS.md). `auto` on TPU picks the tiled implementation that needs the least."""
from __future__ import annotations

# (tokens N, hidden D, vocabulary V) bf16 on a v5p chip -> {implementation: temporary MiB}.
TPU_TEMP_MIB: dict[tuple[int, int, int], dict[str, float]] = {
    (4096, 2048, 152064): {"reference": 4752, "chunked": 1220, "pallas": 6},
    (4096, 3584, 152064): {"reference": 4752, "chunked": 2135, "pallas": 6},
    (16384, 5120, 152064): {"reference": 19008, "chunked": 3307, "pallas": 32},
}

# `auto` chooses among the tiled paths; the reference materialises [N, V] logits by design.
TILED = ("chunked", "pallas")


def least_memory_on_tpu() -> str:
    """The tiled implementation with the least measured temporary memory, summed over the sizes."""
    totals = {impl: sum(row[impl] for row in TPU_TEMP_MIB.values()) for impl in TILED}
    return min(totals, key=totals.get)
