"""`jaxwrite data criteria ...`: the issue's entry point for criteria generation, the same command as
`jaxwrite prep criteria`. cli/data.py calls `register_criteria(actions)` on its sub-parsers."""
from __future__ import annotations

from jaxwrite.cli._data_prep import add_criteria


def register_criteria(data_subparsers) -> None:
    add_criteria(data_subparsers)
