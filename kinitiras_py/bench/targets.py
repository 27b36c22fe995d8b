"""The targets the benchmark rows are held to (issue 25), and whether a row meets them.

On Pods all unlike each other, through the API server (``bench --e2e``), medians of each
round's own ratios:

* ours with the hand-written webhook's matching count (20 of 1,000 by default): p50 at
  concurrency 1 at most 1.15x the hand-written webhook's and 1.3x the floor's; Pods/s at higher
  concurrency at least 85 % of the hand-written webhook's;
* ours with 1 matching: p50 at most 1.1x the floor's, Pods/s at least 90 % of it;
* beside a slow neighbour (a JavaScript rule at its 100 ms limit on one Pod in ten): the other
  Pods' p99 at higher concurrency at most 2x their p99 without that rule.

On one core at saturation (``bench --floor --uncached``): ours uncached at least 50 % of the
floor's reviews/s with 1 matching, 15 % with 20.

While the background scan runs (``bench --scan``, issue 24): admission's p99 during the first pass
and in the steady state at most 1.25x the baseline's, each p99 the median of the phase's windows.
"""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.bench.e2e import Row
from kinitiras_py.bench.saturation import Saturation


@dataclass(frozen=True)
class Mark:
    """One target: a figure, its bound and which side of it passes."""

    what: str
    value: float
    limit: float
    at_most: bool
    """True: the value passes when at most ``limit``; False: when at least."""

    @property
    def passed(self) -> bool:
        """Whether the value meets the target."""
        return self.value <= self.limit if self.at_most else self.value >= self.limit

    def text(self) -> str:
        """E.g. ``p50 x hand-written 1.22 <= 1.15 FAIL``."""
        return f"{self.what} {self.value:.2f} {'<=' if self.at_most else '>='} {self.limit:g} " + (
            "ok" if self.passed else "FAIL")


def e2e(row: Row) -> list[Mark]:
    """The targets of an end-to-end row (none for rows that only give context)."""
    if not row.distinct or row.role not in ("ours", "slow"):
        return []
    if row.role == "slow":
        return [Mark("others' p99 x alone", row.others_p99_ratio, 2.0, True)] if row.concurrency > 1 else []
    marks = []
    if row.concurrency == 1:
        if row.hand_p50_ratio:
            marks += [Mark("p50 x hand-written", row.hand_p50_ratio, 1.15, True),
                      Mark("p50 x floor", row.p50_ratio, 1.3, True)]
        if row.matching == 1:
            marks.append(Mark("p50 x floor", row.p50_ratio, 1.1, True))
    else:
        if row.hand_rate_ratio:
            marks.append(Mark("pods/s x hand-written", row.hand_rate_ratio, 0.85, False))
        if row.matching == 1:
            marks.append(Mark("pods/s x floor", row.rate_ratio, 0.9, False))
    return marks


SATURATION = {1: 0.5, 20: 0.15}
"""Least share of the floor's reviews/s for ours uncached, by matching count."""


def saturation(result: Saturation) -> list[Mark]:
    """The target of a saturation row: ours uncached with 1 or 20 matching against the floor."""
    limit = SATURATION.get(result.matching)
    if limit is None or not result.name.startswith("ours") or not result.name.endswith("uncached"):
        return []
    return [Mark("reviews/s x floor", result.ratio, limit, False)]


SCAN_P99 = 1.25
"""Most admission p99 during a scan phase, as a multiple of the baseline's (the machine's noise)."""


def scan(phase: str, p99_ratio: float) -> list[Mark]:
    """The target of a scan phase (none for the baseline)."""
    return [] if phase == "baseline" else [Mark("p99 x baseline", p99_ratio, SCAN_P99, True)]
