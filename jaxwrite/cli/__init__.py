"""The `jaxwrite` command. Each module in this package adds one subcommand through
`register(subparsers)`; the module map keeps each command a thin call into the library."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from jaxwrite.common.errors import InputError


class _Parser(argparse.ArgumentParser):
    """No abbreviated long flags: with them `--model-mode X` was silently read as a longer flag it begins.
    Subcommand parsers are built from the parent's class, so every level inherits this."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="jaxwrite",
        description="Train and evaluate long-form writing models in JAX "
                    "(WritingBench, LongWriter-Zero GRPO, RefineBench).")
    parser.add_argument("--debug", action="store_true",
                        help="show the whole traceback of an error (also JAXWRITE_DEBUG=1; taken anywhere on the line)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from jaxwrite.cli._errors import check_output_places, debug_wanted, report
    debug, argv = debug_wanted(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    # Only `--config.KEY=VALUE` overrides may be left over, and only for a command that reads a config
    # (it says so with set_defaults(takes_config=True)); anything else is a typo.
    unknown = [a for a in extra if not a.startswith("--config.")]
    if unknown:
        parser.error(f"unrecognised arguments: {' '.join(unknown)}")
    args.config_overrides = [a for a in extra if a.startswith("--config.")]
    from jaxwrite.common.platform import quiet_libtpu
    quiet_libtpu(args.command)   # before JAX starts: no libtpu preamble on a machine without a TPU
    if args.config_overrides and not getattr(args, "takes_config", False):
        print(f"jaxwrite {args.command}: error: {args.config_overrides[0]}: this command reads no config, so it "
              f"takes no --config.KEY=VALUE overrides (train and compile do)", file=sys.stderr)
        return 2
    try:
        check_output_places(args)
        return int(args.func(args) or 0)
    except (InputError, OSError) as err:   # one line for what the user can mend (--debug: the traceback too)
        status = report(args.command, err, debug)
        if status is None:
            raise
        return status


if __name__ == "__main__":
    sys.exit(main())
