"""Peak FLOPs per device (table for accelerators, measured matmul peak on CPU) and MFU.

MFU = model FLOPs per token × tokens per second / total peak FLOPs of the devices in use. Accelerator
peaks are dense bf16 figures from the vendors' spec sheets; on CPU the peak is the measured fp32
throughput of a jitted matmul on this machine (measured once per process).
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp

# Dense bf16 peak FLOP/s per chip (per GPU), matched against `device.device_kind`.
PEAK_FLOPS_BY_KIND: dict[str, float] = {
    "TPU v4": 275e12,
    "TPU v5 lite": 197e12,      # v5e
    "TPU v5e": 197e12,
    "TPU v5p": 459e12,
    "TPU v5": 459e12,
    "TPU v6 lite": 918e12,      # v6e (Trillium)
    "TPU v6e": 918e12,
    "NVIDIA A100": 312e12,
    "NVIDIA H100": 989e12,
    "NVIDIA H200": 989e12,
}

def measure_matmul_peak(n: int = 2048, repeats: int = 5, dtype=jnp.float32) -> float:
    """Best-of-`repeats` FLOP/s of a jitted [n, n] @ [n, n] matmul on the default device."""
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), dtype)
    matmul = jax.jit(lambda x, y: x @ y)
    matmul(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / best


@functools.lru_cache(maxsize=1)
def cpu_matmul_peak() -> float:
    """Measured fp32 matmul peak of this CPU (whole machine), once per process.

    Not cached on disk: a measurement taken while other jobs load the cores would understate the peak
    for every later run (MFU above 100%); re-measuring costs about a second.
    """
    return measure_matmul_peak()


def total_peak_flops(devices=None, per_device_override: float = 0.0) -> float:
    """Peak FLOP/s of `devices` together. `per_device_override` > 0 replaces the table / measurement."""
    devices = jax.devices() if devices is None else devices
    if per_device_override > 0:
        return per_device_override * len(devices)
    if devices[0].platform == "cpu":
        # Simulated CPU devices share one machine: the machine's peak is the ceiling.
        return cpu_matmul_peak()
    kind = devices[0].device_kind
    for name, flops in PEAK_FLOPS_BY_KIND.items():
        if kind.startswith(name):
            return flops * len(devices)
    raise ValueError(f"no peak FLOPs known for device kind '{kind}'; set peak_flops_per_device in the config")


def mfu(flops_per_token: float, tokens_per_sec: float, peak_flops: float) -> float:
    return flops_per_token * tokens_per_sec / peak_flops
