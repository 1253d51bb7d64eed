"""`jaxwrite prep STEP ...`: model-labelled data preparation (criteria, teacher responses, critic scores,
per-subdomain filter, long-form prompts with length ranges); thin calls into jaxwrite.prep."""
from __future__ import annotations

from jaxwrite.cli._data_prep import register_prep_steps
from jaxwrite.common.errors import InputError

_OUTPUTS = ("output", "output_dir", "labels", "summary")


def register(subparsers) -> None:
    parser = subparsers.add_parser("prep", help="model-labelled data: criteria, critic-filtered writer SFT, "
                                                "long-form prompts with length ranges")
    steps = parser.add_subparsers(dest="step", metavar="STEP")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    register_prep_steps(steps)
    for step in steps.choices.values():
        step.set_defaults(func=_local_outputs(step.get_default("func")))


def _local_outputs(func):
    """Refuses a bucket output in one line before anything is written: prep steps write local files only."""
    def run(args) -> int:
        from jaxwrite.common.remote import is_remote
        for name in _OUTPUTS:
            value = getattr(args, name, None)
            if value and is_remote(value):
                raise InputError(f"--{name.replace('_', '-')}: expected a local path: prep steps write local "
                                 "files only (generate and the eval commands take gs:// outputs); write locally "
                                 "and copy (gcloud storage cp), or use a gcsfuse mount", path=value)
        return func(args)
    return run
