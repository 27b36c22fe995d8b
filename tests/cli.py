"""The CLI run in-process for tests, its output captured."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from kinitiras_py.cli.main import main


def run(*args: str | Path, usage_exit: bool = False) -> tuple[int, str, str]:
    """``main(args)`` with stdout and stderr captured: (exit code, stdout, stderr).

    An exception escaping ``main`` fails the test, SystemExit included, unless ``usage_exit``:
    then argparse's exit on a usage error is returned as its code (what the shell would see).
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            if not usage_exit:
                raise
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()
