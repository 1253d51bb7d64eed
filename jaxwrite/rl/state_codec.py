"""numpy arrays inside a JSON checkpoint state (the trainer stores a batch source's state as JSON)."""
from __future__ import annotations

import base64
import io

import numpy as np


def pack_arrays(arrays: dict[str, np.ndarray]) -> str:
    """Named arrays -> one ASCII string (compressed .npz, base64), dtypes and shapes kept exactly."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def unpack_arrays(blob: str) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(blob))) as data:
        return {k: data[k] for k in data.files}
