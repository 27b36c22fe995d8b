"""``kinitiras-py dev up|down|status``: the local control plane."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kinitiras_py.base.errors import DevError
from kinitiras_py.dev import controlplane


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``dev`` command group."""
    parser = sub.add_parser("dev", help="run a local control plane (etcd, kube-apiserver, controller-manager)")
    parser.set_defaults(handler=lambda _args: parser.print_help() or 2)
    dev_sub = parser.add_subparsers(dest="dev_command", metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--run-dir", type=Path, default=controlplane.default_run_dir(),
                        help="directory for data, logs, certificates and the kubeconfig (default: %(default)s)")
    p_up = dev_sub.add_parser("up", parents=[common], help="build (once), start and apply the CRDs")
    p_up.add_argument("--apiserver-port", type=int, default=None,
                      help="fixed kube-apiserver port (default: a free one)")
    p_up.add_argument("--no-webhook", action="store_true",
                      help="start only the control plane (a baseline without admission policies)")
    p_up.set_defaults(handler=_up)
    dev_sub.add_parser("down", parents=[common], help="stop what `dev up` started and remove the run directory") \
        .set_defaults(handler=_down)
    dev_sub.add_parser("status", parents=[common], help="say what runs").set_defaults(handler=_status)
    dev_sub.add_parser("build", help="install the Debian packages and build the Kubernetes binaries (cached)") \
        .set_defaults(handler=_build)


def _up(args: argparse.Namespace) -> int:
    from kinitiras_py.api import crds

    started = time.monotonic()
    try:
        controlplane.ensure_not_running(args.run_dir)
        state = controlplane.up(args.run_dir, args.apiserver_port, log=_log, crds=crds.build_crds(),
                                 webhook=not args.no_webhook)
    except DevError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    _log(f"control plane up in {time.monotonic() - started:.1f} s; logs in {state.run_dir}/logs")
    print(f"export KUBECONFIG={state.kubeconfig}")
    return 0


def _build(_args: argparse.Namespace) -> int:
    from kinitiras_py.dev import binaries

    try:
        print(binaries.ensure_binaries())
    except DevError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _down(args: argparse.Namespace) -> int:
    stopped = controlplane.down(args.run_dir)
    _log("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def _status(args: argparse.Namespace) -> int:
    state = controlplane.load_state(args.run_dir)
    if state is None:
        print(f"no control plane in {args.run_dir}")
        return 1
    alive = controlplane.running(state)
    for name, pid in state.pids.items():
        port = state.ports.get(name)
        where = f" on 127.0.0.1:{port}" if port else ""
        print(f"{name:<26} pid {pid:<8} {'running' if alive[name] else 'NOT RUNNING'}{where}")
    print(f"export KUBECONFIG={state.kubeconfig}")
    return 0 if all(alive.values()) else 1


def _log(message: str) -> None:
    print(message, file=sys.stderr)
