"""The platform a computation is being built for: normally JAX's default backend, but an ahead-of-time
compile on a CPU host for a TPU slice (`jaxwrite compile`) builds for "tpu". Code that picks an
implementation by platform (kernels, attention) asks `target_backend()`, never jax.default_backend()."""
from __future__ import annotations

import contextlib
import contextvars
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
