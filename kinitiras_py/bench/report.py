"""Print benchmark results as small fixed-width tables (or JSON)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from kinitiras_py.bench import targets
from kinitiras_py.bench.e2e import Row
from kinitiras_py.bench.runner import Stats
from kinitiras_py.bench.saturation import Saturation
from kinitiras_py.bench.webhook import RateStats


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def _marks(marks: Sequence[targets.Mark]) -> str:
    return "; ".join(m.text() for m in marks)


def index_table(stats: Sequence[Stats]) -> str:
    """One row per policy count, one matching policy each, and the largest:smallest median ratio."""
    rows = [(str(s.policies), str(s.matching), str(s.requests), _ms(s.median), _ms(s.p90), _ms(s.p99),
             f"{s.ops_per_second:.0f}", f"{s.compile_seconds:.2f}") for s in stats]
    text = _table(("policies", "matching", "requests", "median ms", "p90 ms", "p99 ms", "ops/s", "compile s"), rows)
    if len(stats) > 1 and stats[0].median:
        first, last = stats[0], stats[-1]
        text += f"\nratio {last.policies}:{first.policies} (median): {last.median / first.median:.2f}x"
    return text


def all_match_table(stats: Sequence[Stats]) -> str:
    """One row per policy count where every policy matches, with the cost per matching policy."""
    rows = [(str(s.policies), str(s.requests), _ms(s.median), _ms(s.p90), _ms(s.median / s.policies),
             f"{s.ops_per_second:.0f}") for s in stats]
    return _table(("policies", "requests", "median ms", "p90 ms", "ms/policy", "ops/s"), rows)


def webhook_table(stats: Sequence[RateStats], floor: Sequence[RateStats]) -> str:
    """One row per offered rate: achieved rate, errors and latency percentiles, then the floor's
    at the same rate and our median and p99 as ratios to its."""
    rows = [(f"{s.offered:.0f}", f"{s.achieved:.0f}", str(s.sent), str(s.errors), _ms(s.median), _ms(s.p90),
             _ms(s.p99), _ms(s.max), _ms(f.median), _ms(f.p99), _ratio(s.median, f.median), _ratio(s.p99, f.p99))
            for s, f in zip(stats, floor, strict=True)]
    return _table(("offered/s", "achieved/s", "sent", "errors", "median ms", "p90 ms", "p99 ms", "max ms",
                   "floor median ms", "floor p99 ms", "median x floor", "p99 x floor"), rows)


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base else "-"


def saturation_table(results: Sequence[Saturation]) -> str:
    """One row per server: saturation rate and its ratio to the floor, latency, CPU of server and load."""
    rows = [(s.name, f"{s.rate:.0f}", f"{s.ratio:.3f}", _ms(s.p50), _ms(s.p99), f"{s.server_busy:.2f}",
             f"{s.server_cpu:.2f}", f"{s.load_busy:.2f}", f"{s.load_cpu:.2f}", _ms(s.cpu_per_review),
             f"{s.cpu_ratio:.2f}", f"{s.rss / 2**20:.0f}", str(s.answered), str(s.errors),
             _marks(targets.saturation(s))) for s in results]
    return _table(("server", "reviews/s", "x floor", "p50 ms", "p99 ms", "server busy", "server cpu", "load busy",
                   "load cpu", "cpu ms/review", "x floor", "rss MiB", "answered", "errors", "target"), rows)


def e2e_table(rows: Sequence[Row]) -> str:
    """One row per set-up and concurrency, with the ratios to the floor set-up and the
    hand-written webhook, the slow neighbour's other Pods' p99, and each row's targets marked."""
    def opt(value: float) -> str:
        return f"{value:.2f}" if value else "-"

    cells = [(r.setup, str(r.concurrency), str(r.pods), str(r.errors), _ms(r.p50), _ms(r.p90), _ms(r.p99),
              f"{r.rate:.0f}", f"{r.p50_ratio:.2f}", f"{r.rate_ratio:.2f}", opt(r.hand_p50_ratio),
              opt(r.hand_rate_ratio), _ms(r.others_p99) if r.role == "slow" else "-", opt(r.others_p99_ratio),
              f"{r.load_busy:.2f}", f"{r.load_cpu:.2f}", _marks(targets.e2e(r))) for r in rows]
    return _table(("set-up", "conc", "pods", "errors", "p50 ms", "p90 ms", "p99 ms", "pods/s", "p50 x floor",
                   "pods/s x floor", "p50 x hand", "pods/s x hand", "others p99 ms", "others p99 x",
                   "load busy", "load cpu", "targets"), cells)


def e2e_verdict(rows: Sequence[Row]) -> str:
    """One line: how many of the rows' targets were met, and which were missed."""
    marks = [(r, m) for r in rows for m in targets.e2e(r)]
    missed = [f"{r.setup} c={r.concurrency}: {m.text()}" for r, m in marks if not m.passed]
    return f"targets met: {len(marks) - len(missed)} of {len(marks)}" + (
        "; missed: " + ", ".join(missed) if missed else "")


def as_json(runs: Mapping[str, Sequence[Stats | RateStats | Saturation | Row]]) -> dict[str, Any]:
    """Every run by name, as plain data (durations in seconds)."""
    def row(s: Stats | RateStats | Saturation | Row) -> dict[str, Any]:
        if isinstance(s, Stats):
            return {**asdict(s), "ops_per_second": s.ops_per_second}
        marks = targets.e2e(s) if isinstance(s, Row) else targets.saturation(s) if isinstance(s, Saturation) else []
        return {**asdict(s), "targets": [{**asdict(m), "passed": m.passed} for m in marks]} if marks else asdict(s)

    return {name: [row(s) for s in stats] for name, stats in runs.items()}
