"""Peak FLOPs per device (table for accelerators, measured matmul peak on CPU) and MFU.

MFU = model FLOPs per token × tokens per second / total peak FLOPs of the devices in use. Accelerator
peaks are dense bf16 figures from the vendors' spec sheets; on CPU the peak is the measured fp32
throughput of a jitted matmul on this machine (cached per CPU model and jax version).
"""
from __future__ import annotations

import json
import os
import platform
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

_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "jaxwrite", "cpu_matmul_peak.json")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def cpu_matmul_peak() -> float:
    """Measured fp32 matmul peak of this CPU (whole machine), cached on disk."""
    key = f"{_cpu_name()}|{os.cpu_count()}|jax {jax.__version__}"
    try:
        with open(_CACHE, encoding="utf-8") as f:
            cached = json.load(f)
        if key in cached:
            return float(cached[key])
    except (OSError, ValueError):
        cached = {}
    peak = measure_matmul_peak()
    cached[key] = peak
    os.makedirs(os.path.dirname(_CACHE), exist_ok=True)
    tmp = _CACHE + f".{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(cached, f)
    os.replace(tmp, _CACHE)
    return peak


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
