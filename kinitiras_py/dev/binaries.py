"""Find or build the cached kube-apiserver and kube-controller-manager binaries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from kinitiras_py.base.errors import DevError

BUILD_SCRIPT = Path(__file__).with_name("build_k8s.sh")
SERVER_BINARIES = ("kube-apiserver", "kube-controller-manager")
RECIPE = "r2"
"""Build recipe revision: builds made by an older recipe are not reused (r1 had a crashing reflect2)."""


def cache_root() -> Path:
    """Where builds and run directories live: ``$KINITIRAS_CACHE`` or ``~/.cache/kinitiras-py``."""
    return Path(os.environ.get("KINITIRAS_CACHE", Path.home() / ".cache" / "kinitiras-py"))


def cached_binaries(root: Path | None = None) -> Path | None:
    """The newest cached build directory holding both server binaries, if any."""
    root = root or cache_root()
    builds = sorted(p for p in root.glob(f"k8s-*-{RECIPE}") if all((p / b).is_file() for b in SERVER_BINARIES))
    return builds[-1] if builds else None


def ensure_binaries(root: Path | None = None) -> Path:
    """Return the build directory, building Kubernetes first when needed (minutes, once)."""
    root = root or cache_root()
    found = cached_binaries(root)
    if found is not None and shutil.which("etcd"):
        return found
    # The script prints progress on stderr (passed through) and the build directory last.
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), str(root), RECIPE], stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
    )
    if proc.returncode != 0:
        raise DevError(f"building the Kubernetes binaries failed (exit {proc.returncode}); "
                       f"log: {root / 'build.log'}")
    found = cached_binaries(root)
    if found is None:
        raise DevError(f"the build finished but no binaries are under {root}; log: {root / 'build.log'}")
    return found


def etcd_binary() -> str:
    """Path of etcd (Debian's etcd-server), installed by the build script when missing."""
    path = shutil.which("etcd")
    if path is None:
        raise DevError("etcd is not installed; `kinitiras-py dev up` installs it (apt-get install etcd-server)")
    return path
