"""GGUF files (llama.cpp's single-file checkpoints) opened through the `gguf` library, with one-line errors.

One `GGUFFile` serves every reader of the file: the model config and weights (jaxwrite.models) and the
tokenizer and chat template (jaxwrite.text) come from the same metadata, so a command that needs both
opens the file once (the reader parses every metadata array up front: about 3 s for a 49k-token
vocabulary). Tensors stay memory-mapped until a caller dequantizes one.
"""
from __future__ import annotations

import functools
import mmap
import os
from typing import Any

from jaxwrite.common.errors import InputError

GGUF_SUFFIX = ".gguf"
_MAGIC = b"GGUF"


def is_gguf_path(path: str | os.PathLike) -> bool:
    """Whether `path` names a GGUF file (by its suffix; the file is checked when opened)."""
    return os.fspath(path).lower().endswith(GGUF_SUFFIX)


class GGUFFile:
    """Metadata (key -> Python value) and tensor records of one GGUF file.

    A file cut short (a partial download), or one that is not GGUF at all, fails here with one line
    naming the file, its size and what was expected.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise InputError("GGUF file not found; expected a llama.cpp .gguf model file", path=self.path)
        size = os.path.getsize(self.path)
        with open(self.path, "rb") as f:
            magic = f.read(4)
        if magic != _MAGIC:
            raise InputError(f"not a GGUF file (starts with {magic!r}); expected the magic bytes {_MAGIC!r}",
                             path=self.path)
        import gguf

        try:
            reader = gguf.GGUFReader(self.path)
            metadata = {name: field.contents() for name, field in reader.fields.items()
                        if not name.startswith("GGUF.")}
        except (ValueError, IndexError, OverflowError, UnicodeDecodeError, EOFError) as err:
            # The reader maps the whole file: a header, array or tensor that runs past its end fails here.
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            if "GGMLQuantizationType" in reason:   # a tensor type id this gguf library does not know
                raise InputError(f"unknown GGUF tensor type ({reason}); expected a type llama.cpp's gguf "
                                 f"library reads (F32, F16, BF16, Q4_0 ... Q8_0, Q2_K ... Q6_K)",
                                 path=self.path) from None
            raise InputError(f"truncated or corrupt GGUF file ({size:,} bytes; {reason}): expected a complete "
                             f"file; a partial download? fetch it again", path=self.path) from None
        self._reader = reader
        self.metadata: dict[str, Any] = metadata
        self.tensors = {t.name: t for t in reader.tensors}
        # Tensor data must end inside the file; the reader checks shapes, this also catches a cut that
        # falls exactly on a tensor boundary.
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
        if end > size:
            raise InputError(f"truncated GGUF file: tensor data ends at byte {end:,} but the file has {size:,} "
                             f"bytes; expected a complete file (a partial download? fetch it again)", path=self.path)

    def release(self, tensor) -> None:
        """Drops a tensor's file pages from this process's resident memory once it has been read (they stay
        in the page cache): a mapped page that was read otherwise counts as resident until the file is
        closed, so loading a model would hold the whole file in RSS beside the model."""
        mapped = getattr(self._reader.data, "_mmap", None)
        if mapped is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = int(tensor.data_offset) // mmap.PAGESIZE * mmap.PAGESIZE
        try:
            mapped.madvise(mmap.MADV_DONTNEED, start, int(tensor.data_offset) + int(tensor.n_bytes) - start)
        except (OSError, ValueError):   # an advice the platform refuses changes nothing but memory
            pass

    @property
    def architecture(self) -> str:
        return str(self.require("general.architecture"))

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        if key not in self.metadata:
            raise InputError("missing GGUF metadata key", path=self.path, field=key)
        return self.metadata[key]

    def __repr__(self) -> str:
        return f"GGUFFile({self.path!r}, {len(self.tensors)} tensors)"


def open_gguf(source: "str | os.PathLike | GGUFFile") -> GGUFFile:
    """`source` itself when already open, else the file opened (or the same file this process opened
    lately, unchanged since)."""
    if isinstance(source, GGUFFile):
        return source
    path = os.fspath(source)
    try:
        stat = os.stat(path)
    except OSError:
        return GGUFFile(path)   # its own one-line error
    return _opened(path, stat.st_size, stat.st_mtime_ns)


# One training run reads the same GGUF for its architecture, tokenizer, weights and again for a reward model
# or warm-up (five opens of ~3-6 s each for a 49k-token vocabulary, a third of a 135M run's start). Keyed by
# size and mtime too, so a file rewritten in place is opened afresh; each kept file is a memory map whose
# read pages `release` already dropped.
@functools.lru_cache(maxsize=2)
def _opened(path: str, size: int, mtime_ns: int) -> GGUFFile:
    return GGUFFile(path)
