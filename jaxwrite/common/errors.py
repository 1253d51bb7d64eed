"""User-facing input errors: one line naming the file, line, field and what was expected."""
from __future__ import annotations


class InputError(ValueError):
    """Bad user input. The CLI prints `str(err)` as one line and exits with status 2."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        where = []
        if path is not None:
            where.append(str(path) + (f":{line}" if line is not None else ""))
        if field is not None:
            where.append(f"field '{field}'")
        prefix = " ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.path, self.line, self.field, self.message = path, line, field, message
