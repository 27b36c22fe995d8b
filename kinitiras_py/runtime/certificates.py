"""The serving certificate for `serve`: static files, or the rotator with a Secret and a Lease."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinitiras_py.certs.policy import CertPolicy
from kinitiras_py.certs.rotator import Rotator
from kinitiras_py.certs.storage import SecretStore
from kinitiras_py.certs.tls import ReloadableTLS
from kinitiras_py.cluster.leader import LeaderElector, default_identity

log = logging.getLogger("kinitiras_py.runtime")


@dataclass(frozen=True)
class CertSettings:
    """Where certificates come from. Without ``secret`` the files in the cert dir are served as-is."""

    secret: str | None = None
    namespace: str = "kinitiras-system"
    service: str = "kinitiras-webhook"
    extra_dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    lease: str = "kinitiras-py-webhook"
    check_interval: float = 3600.0
    poll_interval: float = 10.0


@dataclass
class Certificates:
    """What the rest of `serve` needs from the certificate source."""

    tls: ReloadableTLS
    bundle: Callable[[], bytes | None]
    is_leader: Callable[[], bool] = lambda: True
    ready: Callable[[], bool] = lambda: True
    rotator: Rotator | None = None
    elector: LeaderElector | None = None

    def start(self) -> None:
        """Start leader election and rotation (nothing to start for static files)."""
        if self.rotator is not None and self.elector is not None:
            rotator = self.rotator
            self.elector.on_change(lambda _leading: rotator.kick())
            self.elector.start()
            rotator.start()

    async def stop(self) -> None:
        """Release the Lease, then stop rotating (removing this replica's report). The Lease goes
        first: a follower takes over at its next try, without waiting for the report's removal."""
        if self.elector is not None:
            await self.elector.stop()
        if self.rotator is not None:
            await self.rotator.stop()


def static(cert_dir: Path) -> Certificates:
    """Serve ``tls.crt``/``tls.key`` from ``cert_dir``; ``ca.crt`` is the bundle to register."""
    tls = ReloadableTLS((cert_dir / "tls.crt").read_bytes(), (cert_dir / "tls.key").read_bytes())
    return Certificates(tls=tls, bundle=lambda: (cert_dir / "ca.crt").read_bytes())


def rotating(api: Any, settings: CertSettings,
             on_bundle: Callable[[bytes], Awaitable[bool]] | None) -> Certificates:
    """Certificates kept in a Secret by the rotator; only the Lease holder writes it.

    ``on_bundle`` injects a new CA bundle into the webhook configurations (True once written).
    """
    identity = default_identity()
    elector = LeaderElector(api, settings.namespace, settings.lease, identity)
    tls = ReloadableTLS()
    policy = CertPolicy.for_service(settings.service, settings.namespace, settings.extra_dns, settings.ips)
    rotator = Rotator(SecretStore(api, settings.namespace, settings.secret or "kinitiras-webhook-cert"), policy,
                      replica_id=identity, tls=tls, on_bundle=on_bundle, is_leader=lambda: elector.is_leader,
                      check_interval=settings.check_interval, poll_interval=settings.poll_interval)
    return Certificates(tls=tls, bundle=rotator.bundle.get, is_leader=lambda: elector.is_leader,
                        ready=rotator.ready.is_set, rotator=rotator, elector=elector)
