"""Whether the gradients being traced are summed over microbatches (the trainer's accumulation loop).

Code that emits a collective in its backward (the LM head's reduce-scatter in kernels/logprobs.py) reads
this at trace time: inside an accumulation loop XLA may move a reduce-scatter out of the loop (it is
linear), accumulating the whole unreduced float32 gradient per chip instead, which such code prevents
with an optimization barrier. Outside a loop the barrier would only cost memory.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_ACCUMULATING: contextvars.ContextVar[bool] = contextvars.ContextVar("jaxwrite_accumulating_gradients",
                                                                    default=False)


@contextlib.contextmanager
def accumulating_gradients() -> Iterator[None]:
    """Marks the gradients traced inside this block as one microbatch's, summed by a loop."""
    token = _ACCUMULATING.set(True)
    try:
        yield
    finally:
        _ACCUMULATING.reset(token)


def gradients_accumulate() -> bool:
    return _ACCUMULATING.get()
