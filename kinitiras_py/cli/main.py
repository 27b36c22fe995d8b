"""Entry point of the ``kinitiras-py`` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from kinitiras_py import __version__
from kinitiras_py.base.errors import BenchError
from kinitiras_py.cli import bench, convert, crds, dev, interrupts, offline, serve
from kinitiras_py.cluster.kubeconfig import ConfigError

_GIVEN = "_options_given"
"""Where the options already given are noted on the namespace during parsing (removed after)."""


class _Once:
    """Mixed into an option's action: giving the option a second time is a usage error (exit 2),
    where argparse would silently keep the last value."""

    option_strings: list[str]
    dest: str

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given: set[str] = namespace.__dict__.setdefault(_GIVEN, set())
        if self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} was given more than once; it takes one value")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


_SINGLE_VALUED: dict[type, type] = {
    kind: type(f"_Once{kind.__name__}", (_Once, kind), {})
    for kind in (argparse._StoreAction, argparse._StoreConstAction, argparse._StoreTrueAction,
                 argparse._StoreFalseAction)
}


def refuse_repeats(parser: argparse.ArgumentParser) -> None:
    """Make every single-valued option of ``parser`` and its subcommands refuse repetition."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                refuse_repeats(child)
        elif action.option_strings and type(action) in _SINGLE_VALUED:
            action.__class__ = _SINGLE_VALUED[type(action)]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser: every subcommand registers itself here."""
    parser = argparse.ArgumentParser(
        prog="kinitiras-py",
        description="Kubernetes admission policy controller: override and validate objects with policies.",
    )
    parser.add_argument("--version", action="version", version=f"kinitiras-py {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (dev, crds, offline, convert, serve, bench):
        module.register(sub)
    refuse_repeats(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.__dict__.pop(_GIVEN, None)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        # Every command, not only those that start processes: none may end in a traceback.
        code: int = interrupts.stoppable(lambda: args.handler(args), f"kinitiras-py {args.command}")
    except (OSError, ConfigError, BenchError) as e:
        # The machine refused something the command was told to use (a path, a port), the kubeconfig
        # does not say how to reach the API server, or a benchmark's API server kept failing: say
        # what, no traceback.
        print(f"kinitiras-py {args.command}: {e}", file=sys.stderr)
        return 2
    return code


def run() -> NoReturn:
    """The process entry point: :func:`main`, then exit without finalizing the interpreter.

    Output is flushed first; nothing of ours needs finalizing (no atexit handler, files are closed
    by the commands). Finalizing after a large ``apply`` (thousands of objects) crashed now and then
    (SIGSEGV in the collector's last pass over a freed builtin function of an extension module),
    turning an exit code of 0 or 1 into 139."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
