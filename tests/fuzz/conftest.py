"""Hypothesis profiles for the fuzz suite.

``ci`` (the default) keeps the suite inside the normal test run: a few hundred examples per
test and no per-example deadline (a loaded CI machine must not turn slowness into a failure;
stalls are caught by the tests' own invariants). ``long`` is what ``make fuzz`` runs: set
``KINITIRAS_FUZZ=long`` and each test draws examples until the run is stopped or the (huge)
budget is spent.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=_SUPPRESSED,
                          print_blob=True)
settings.register_profile("long", max_examples=10_000_000, deadline=None,
                          suppress_health_check=_SUPPRESSED, print_blob=True)
settings.load_profile("long" if os.environ.get("KINITIRAS_FUZZ") == "long" else "ci")
