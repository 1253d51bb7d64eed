"""A kernel checks itself on a device kind it has not run on: value and gradient against the chunked XLA
path on a small case, before `auto` trusts it there.

`auto` on TPU picks the Pallas kernels, which CI compiles for TPU (libtpu, AOT) and runs in interpret
mode, but which no CI run executes on a chip. So the first time a process uses `auto` on a device kind,
`verified_impl` runs the chosen kernel and the chunked path on a small random problem (both families of
kernels need their own block multiples: 2 x 2 blocks), compares log-probs, entropies and both gradients,
and keeps the kernel only if they agree; otherwise it warns once and falls back to "chunked". The
verdict is cached per (device kind, platform version, jax version, kernel) in memory and in
`$XDG_CACHE_HOME/jaxwrite/kernel_checks.json` (~/.cache by default), so the check runs once per machine
image, not per run. It runs only where the kernel would run for real: not for an ahead-of-time compile
for another platform, and not on a CPU (where Pallas only interprets).
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

# Largest error allowed, relative to the largest reference value, per output and gradient: far above
# the rounding of bf16-pass matmuls (about 1e-3 here), far below what a wrong kernel gives.
TOLERANCE = 0.02
# The check's problem (tokens, hidden, vocabulary): 2 x 2 of the TPU kernels' default blocks.
CHECK_SHAPE = (512, 256, 1024)
_VERDICTS: dict[str, dict] = {}


def running_backend() -> str:
    """The platform this process computes on (not the one an AOT compile targets: target_backend)."""
    return jax.default_backend()


def cache_file() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "jaxwrite", "kernel_checks.json")


def device_key(impl: str, device=None) -> str:
    """What a verdict holds for: the kernel, the device kind, the platform (runtime) version, jax."""
    device = device or jax.devices()[0]
    version = getattr(getattr(device, "client", None), "platform_version", "") or ""
    return f"{impl} | {device.platform} {device.device_kind} | {version.splitlines()[0] if version else ''} | " \
           f"jax {jax.__version__}"


def compare(fn: Callable, reference: Callable, shape: tuple[int, int, int] | None = None,
            seed: int = 0) -> dict[str, float]:
    """Relative max errors of fn against reference (same signature as the log-prob implementations) on one
    random problem of `shape` (N, D, V; default CHECK_SHAPE): {"logp", "entropy", "dh", "dw"}; NaN when fn
    gives a non-finite value."""
    n, d, v = shape or CHECK_SHAPE
    k = jax.random.split(jax.random.key(seed), 5)
    h = jax.random.normal(k[0], (n, d), jnp.float32)                      # [N, D]
    w = 0.05 * jax.random.normal(k[1], (d, v), jnp.float32)               # [D, V]
    ids = jax.random.randint(k[2], (n,), 0, v)
    g_logp, g_ent = jax.random.normal(k[3], (n,)), jax.random.normal(k[4], (n,))

    def run(impl):
        def objective(h, w):
            logp, ent = impl(h, w, ids, 1.0, None, None)
            return jnp.sum(g_logp * logp + g_ent * ent), (logp, ent)
        (_, (logp, ent)), (dh, dw) = jax.jit(jax.value_and_grad(objective, argnums=(0, 1), has_aux=True))(h, w)
        return {"logp": logp, "entropy": ent, "dh": dh, "dw": dw}

    got, want = run(fn), run(reference)
    errors = {}
    for name in want:
        a, b = np.asarray(got[name], np.float64), np.asarray(want[name], np.float64)
        errors[name] = (float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-6)) if np.all(np.isfinite(a))
                        else float("nan"))
    return errors


def verified_impl(impl: str, fn: Callable, reference: Callable, *, fallback: str = "chunked", device=None,
                  force: bool = False) -> str:
    """`impl` if it agrees with `reference` on this device kind (checked once, cached), else `fallback`
    with a warning. Checks only where the kernel runs for real (an accelerator, no AOT compile for
    another platform) unless `force` (tests)."""
    from jaxwrite.common import target_backend
    backend = running_backend()
    if not force and (backend == "cpu" or target_backend() != backend):
        return impl
    key = device_key(impl, device)
    verdict = _VERDICTS.get(key) or _read_cache().get(key)
    if verdict is None:
        with jax.ensure_compile_time_eval():   # runs now, even when asked while a step is being traced
            errors = compare(fn, reference)
        ok = all(e <= TOLERANCE for e in errors.values())    # NaN fails
        verdict = {"ok": ok, "errors": errors}
        _write_cache(key, verdict)
        if not ok:
            worst = max(errors, key=lambda name: np.inf if np.isnan(errors[name]) else errors[name])
            warnings.warn(f"jaxwrite: the '{impl}' log-prob kernel disagrees with the chunked path on "
                          f"{key.split(' | ')[1]} ({worst}: relative error {errors[worst]:.3g} > {TOLERANCE}); "
                          f"using '{fallback}' instead (verdict cached in {cache_file()})", stacklevel=3)
    _VERDICTS[key] = verdict
    return impl if verdict["ok"] else fallback


def _read_cache() -> dict:
    try:
        with open(cache_file(), encoding="utf-8") as f:
            found = json.load(f)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(key: str, verdict: dict) -> None:
    path = cache_file()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cache = {**_read_cache(), key: verdict}
        tmp = f"{path}.{os.getpid()}.partial"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(cache, f, indent=1, allow_nan=True)
        os.replace(tmp, path)
    except OSError:   # a read-only home: the verdict still holds for this process
        pass
