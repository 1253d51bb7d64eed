"""The platform a computation is being built for: normally JAX's default backend, but an ahead-of-time
compile on a CPU host for a TPU slice (`jaxwrite compile`) builds for "tpu". Code that picks an
implementation by platform (kernels, attention) asks `target_backend()`, never jax.default_backend().
`quiet_libtpu` keeps libtpu's start-up preamble off a machine without a TPU."""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator

_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("jaxwrite_target_backend", default=None)


def target_backend() -> str:
    """"tpu", "gpu", "cpu", ...: the compile target if one is set, else JAX's default backend."""
    target = _TARGET.get()
    if target is not None:
        return target
    import jax
    return jax.default_backend()


@contextlib.contextmanager
def building_for(backend: str) -> Iterator[None]:
    """Inside this block, target_backend() is `backend` (an AOT compile for another platform)."""
    token = _TARGET.set(backend)
    try:
        yield
    finally:
        _TARGET.reset(token)


def tpu_attached() -> bool:
    """Whether this machine has a TPU (a Google PCI device, as JAX's own check reads them) or says it is a
    TPU host (TPU_ACCELERATOR_TYPE, JAX_FORCE_TPU_INIT)."""
    import glob
    if os.environ.get("TPU_ACCELERATOR_TYPE") or "JAX_FORCE_TPU_INIT" in os.environ:
        return True
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor, encoding="ascii") as f:
                if f.read().strip() == "0x1ae0":
                    return True
        except OSError:
            continue
    return False


def quiet_libtpu(command: str | None) -> bool:
    """Keeps libtpu from printing its start-up preamble ("could not determine TPU accelerator type",
    TPU_WORKER_HOSTNAMES) on a machine without a TPU: JAX initialises every backend it knows, libtpu's
    included when installed (the tpu extra, for `jaxwrite compile`), and libtpu complains before JAX falls
    back to the CPU. Sets JAX_PLATFORMS=cpu before JAX is imported unless a TPU or a GPU is here, the user
    chose platforms, or the command compiles for a TPU (`compile`, whose compiler is libtpu). Returns
    whether it did."""
    import importlib.util
    import sys
    if (command == "compile" or "JAX_PLATFORMS" in os.environ or "jax" in sys.modules
            or importlib.util.find_spec("libtpu") is None or tpu_attached()
            or any(os.path.exists(d) for d in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd"))):
        return False
    os.environ["JAX_PLATFORMS"] = "cpu"
    return True
