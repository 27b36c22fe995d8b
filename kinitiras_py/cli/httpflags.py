"""The flags that set what ``from: http`` references may call, shared by ``serve`` and the offline
commands so that ``apply``, ``render`` and ``test`` reproduce the webhook's verdict."""

from __future__ import annotations

import argparse

from kinitiras_py.refs.egress import ALLOW_FLAG, NAMESPACED_FLAG, AllowEntry, Egress


def add(p: argparse.ArgumentParser) -> None:
    """Add ``--http-allow`` and ``--http-namespaced`` to ``p``."""
    p.add_argument(ALLOW_FLAG, action="append", default=[], metavar="PREFIX", dest="http_allow", type=_prefix,
                   help="let http references call URLs under this prefix (scheme://host[:port][/path]; "
                        "repeatable). With any prefix, cluster policies are limited to the prefixes too; "
                        "loopback, link-local and the API server's addresses are only reached through a "
                        "prefix naming the IP address itself. See docs/http-references.md")
    p.add_argument(NAMESPACED_FLAG, action="store_true", dest="http_namespaced",
                   help=f"let namespaced policies (OverridePolicy, ValidatePolicy) use http references, "
                        f"only under the {ALLOW_FLAG} prefixes (default: refused)")


def _prefix(text: str) -> str:
    """``text`` when it is a usable prefix (argparse says why not)."""
    try:
        AllowEntry.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def egress(args: argparse.Namespace) -> Egress | str:
    """The setting the flags give, or what is wrong with them."""
    try:
        return Egress.parse(args.http_allow, args.http_namespaced)
    except ValueError as e:
        return str(e)
