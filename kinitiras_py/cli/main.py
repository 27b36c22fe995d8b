"""Entry point of the ``kinitiras-py`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kinitiras_py import __version__
from kinitiras_py.cli import bench, convert, crds, dev, offline, serve
from kinitiras_py.cluster.kubeconfig import ConfigError


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        code: int = args.handler(args)
    except (OSError, ConfigError) as e:
        # The machine refused something the command was told to use (a path, a port), or the kubeconfig
        # does not say how to reach the API server: say what, no traceback.
        print(f"kinitiras-py {args.command}: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
