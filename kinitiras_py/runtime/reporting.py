"""PolicyReports for `serve`: whether to write them, and the writer and admission feed when so."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kinitiras_py.api.reports import API_VERSION
from kinitiras_py.cluster.client import Api
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.reports.admission import AdmissionFeed, Policies
from kinitiras_py.reports.stats import ReportStats
from kinitiras_py.reports.writer import ReportWriter, uid_lookup

log = logging.getLogger("kinitiras_py.runtime")


@dataclass(frozen=True)
class ReportSettings:
    """``--policy-reports`` and ``--report-writes-per-second``."""

    enabled: bool | None = None
    """True, False, or None: only when the API server serves the PolicyReport CRD."""
    writes_per_second: float = 10.0


@dataclass
class Reporting:
    """The report writer and the feed of admission results into it (both None when reports are off)."""

    writer: ReportWriter | None = None
    feed: AdmissionFeed | None = None

    def start(self) -> None:
        """Start writing and feeding."""
        if self.writer is not None and self.feed is not None:
            self.writer.start()
            self.feed.start()

    async def stop(self) -> None:
        """Stop feeding, then writing."""
        if self.feed is not None:
            await self.feed.stop()
        if self.writer is not None:
            await self.writer.stop()


async def served(discovery: Discovery) -> bool:
    """Whether the API server serves ``wgpolicyk8s.io/v1alpha2`` PolicyReports."""
    try:
        await discovery.resolve(API_VERSION, "PolicyReport")
    except LookupError as e:
        log.info("PolicyReports are not written: %s", e)
        return False
    return True


async def reporting(settings: ReportSettings, api: Any, discovery: Discovery, policies: Policies,
                    is_leader: Callable[[], bool], stats: ReportStats) -> Reporting:
    """The writer and feed ``settings`` ask for (not started)."""
    enabled = settings.enabled if settings.enabled is not None else await served(discovery)
    if not enabled:
        return Reporting()
    transport = Api.of(api)
    writer = ReportWriter(transport, is_leader, writes_per_second=settings.writes_per_second, stats=stats,
                          uid_lookup=uid_lookup(transport, discovery.resolve))
    return Reporting(writer, AdmissionFeed(writer, policies))
