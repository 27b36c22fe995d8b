"""Fuzz: any text as the value of `serve`'s numeric flags.

Invariant: the parser either takes the value (a finite number in the flag's range) or refuses it
with exit 2 and a usage line naming the flag; never an exception. Only the parser runs (parsing
a good value must not start a server).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.cli import serve

RANGES = {"--drain-seconds": (0.0, 3600.0), "--deadline": (0.0, math.inf), "--cel-results-mib": (0.0, 1024.0),
          "--scan-period": (0.0, math.inf), "--scan-cpu-share": (0.0, 1.0),
          "--report-writes-per-second": (0.0, 10000.0)}
NUMBERISH = st.sampled_from(["0", "-0", "1e9", "nan", "inf", "-inf", "1_0", " 5 ", "0x10", "3600", "3600.0001",
                             "1e-400", "", "١٢", "5s", "10\x00"])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kinitiras-py", exit_on_error=True)
    serve.register(p.add_subparsers())
    return p


@pytest.mark.parametrize("flag", sorted(RANGES))
@given(text=st.one_of(NUMBERISH, st.text(max_size=20), st.floats().map(repr)))
def test_a_numeric_flag_takes_a_number_in_range_or_names_itself(flag: str, text: str) -> None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser().parse_args(["serve", f"{flag}={text}"])
    except SystemExit as e:
        assert e.code == 2 and f"argument {flag}" in err.getvalue(), err.getvalue()
        return
    value = getattr(args, flag[2:].replace("-", "_"))
    low, high = RANGES[flag]
    assert math.isfinite(value) and low <= value <= high, (flag, text, value)
