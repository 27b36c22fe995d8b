"""``kinitiras-py crds``: write or print the CustomResourceDefinitions generated from the models."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``crds`` command."""
    parser = sub.add_parser("crds", help="print the policy CRDs, or write them into a directory")
    parser.add_argument("--write", type=Path, metavar="DIR", help="write one YAML file per CRD into DIR")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from kinitiras_py.api import crds

    if args.write:
        for path in crds.write_crds(args.write):
            print(path)
        return 0
    sys.stdout.write(yaml.safe_dump_all(crds.build_crds(), sort_keys=False))
    return 0
