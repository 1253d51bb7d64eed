"""A minimal safetensors reader that reads tensors with positioned reads instead of mmap.

Memory-mapping makes every touched page of the file count as resident memory of the process until it is
unmapped; reading each tensor into its own buffer keeps host memory at the size of the tensor in flight.
Format: 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, raw bytes.
"""
from __future__ import annotations

import json
import os
import struct

import ml_dtypes
import numpy as np

from jaxwrite.common.errors import InputError

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
          "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


class SafetensorsFile:
    def __init__(self, path: str):
        self.path = path
        try:
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
        except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"not a readable safetensors file ({e})", path=path) from None
        header.pop("__metadata__", None)
        self.base = 8 + n
        self.entries: dict[str, dict] = header
        # A partial download keeps its whole header: the data it lists must fit in the file.
        try:
            end = self.base + max((int(e["data_offsets"][1]) for e in header.values()), default=0)
        except (TypeError, KeyError, IndexError, ValueError):
            raise InputError("not a readable safetensors file (a header entry without data_offsets)",
                             path=path) from None
        size = os.path.getsize(path)
        if size < end:
            raise InputError(f"truncated safetensors file: {size:,} bytes, the header lists data up to byte "
                             f"{end:,}; expected a complete file (a partial download? fetch it again)", path=path)

    def keys(self):
        return self.entries.keys()

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.entries[name]["shape"])

    def dtype(self, name: str) -> str:
        return self.entries[name]["dtype"]

    def read(self, name: str) -> np.ndarray:
        entry = self.entries[name]
        begin, end = entry["data_offsets"]
        dtype = np.dtype(DTYPES[entry["dtype"]])
        out = np.empty(tuple(entry["shape"]), dtype)
        if end - begin != out.nbytes:
            raise InputError(f"tensor '{name}': {end - begin} bytes on disk, expected {out.nbytes}", path=self.path)
        buf = memoryview(out.reshape(-1).view(np.uint8))
        with open(self.path, "rb", buffering=0) as f:
            done = 0
            while done < out.nbytes:
                got = os.preadv(f.fileno(), [buf[done:]], self.base + begin + done)
                if got <= 0:
                    raise InputError(f"tensor '{name}': file ends early", path=self.path)
                done += got
        return out
