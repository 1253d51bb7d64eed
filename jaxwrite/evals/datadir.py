"""Where benchmark data lives: `--data-dir`, else $JAXWRITE_DATA_DIR; the folder holding writingbench/ etc."""
from __future__ import annotations

import os
import pathlib

from jaxwrite.common.errors import InputError

DATA_DIR_ENV = "JAXWRITE_DATA_DIR"


def resolve_data_dir(data_dir: str | os.PathLike | None, benchmark: str) -> pathlib.Path:
    """The benchmark's folder `<root>/<benchmark>`, with a one-line error when it is not there."""
    root = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    if root is None:
        raise InputError(f"no data directory: pass --data-dir DIR or set ${DATA_DIR_ENV} "
                         f"(DIR must contain {benchmark}/)")
    folder = pathlib.Path(root) / benchmark
    if not folder.is_dir():
        raise InputError(f"expected a folder {benchmark}/ inside the data directory", path=str(root))
    return folder
