"""`jaxwrite prep STEP ...`: model-labelled data preparation (criteria, teacher responses, critic scores,
per-subdomain filter, long-form prompts with length ranges); thin calls into jaxwrite.prep."""
from __future__ import annotations

from jaxwrite.cli._data_prep import register_prep_steps


def register(subparsers) -> None:
    parser = subparsers.add_parser("prep", help="model-labelled data: criteria, critic-filtered writer SFT, "
                                                "long-form prompts with length ranges")
    steps = parser.add_subparsers(dest="step", metavar="STEP")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    register_prep_steps(steps)
