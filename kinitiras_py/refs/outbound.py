"""The connections ``from: http`` references make, held to :mod:`.egress`'s setting.

- :class:`GuardedResolver` resolves host names itself and hands aiohttp only the addresses it
  checked, so the address connected to is the address checked (a second, different DNS answer
  cannot slip in between: DNS rebinding). aiohttp connects to IP literals without a resolver;
  :meth:`~.egress.Egress.check` has judged those from the URL before any request.
- :func:`following` sends a request and follows redirects only on the same scheme, host and
  port, each hop checked again; a redirect elsewhere is an error.
- :func:`read_body` reads an answer within a size limit.
- :func:`addresses` finds the API server's addresses, which are guarded too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.urls import parse_url
from kinitiras_py.refs.egress import Egress, IPAddress

log = logging.getLogger(__name__)

MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)


class GuardedAddress(KinitirasError, OSError):
    """Every address a host name resolved to is one the webhook never connects to."""


class GuardedResolver(AbstractResolver):
    """A resolver that drops the addresses ``egress`` guards (loopback, link-local, unspecified,
    the API server's) from what ``inner`` (default: aiohttp's) answers."""

    def __init__(self, egress: Egress, inner: AbstractResolver | None = None) -> None:
        self.egress = egress
        self._inner = inner
        self._owned = inner is None

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """The addresses of ``host`` the webhook may connect to; GuardedAddress when none is left."""
        if self._inner is None:
            self._inner = aiohttp.DefaultResolver()  # needs the running loop: made on first use
        kept: list[ResolveResult] = []
        dropped: list[str] = []
        for found in await self._inner.resolve(host, port, family):
            try:
                reason = self.egress.screen(ipaddress.ip_address(found["host"]))
            except ValueError:
                reason = f"address {found['host']!r}, which is not an IP address"
            if reason is None:
                kept.append(found)
            else:
                dropped.append(reason)
        if dropped:
            log.warning("http reference host resolved to guarded addresses",
                        extra={"host": host, "dropped": dropped, "kept": len(kept)})
        if not dropped and not kept:
            raise OSError(f"host {host} resolves to no address")
        if not kept:
            raise GuardedAddress(f"host {host} resolves only to addresses the webhook never connects to "
                                 f"({'; '.join(dropped)}); only an allow entry naming the IP address itself opens one")
        return kept

    async def close(self) -> None:
        """Close the inner resolver when this one made it (one given is its giver's to close)."""
        if self._owned and self._inner is not None:
            inner, self._inner = self._inner, None
            await inner.close()


def session(resolver: GuardedResolver) -> aiohttp.ClientSession:
    """A session whose every connection goes through ``resolver`` (the caller closes it after the
    session); proxies from the environment are ignored (they would connect on the webhook's behalf
    unchecked)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver), trust_env=False)


def guarded_message(error: aiohttp.ClientError) -> str | None:
    """The refusal :class:`GuardedResolver` gave, when it is what made ``error``."""
    cause = error.os_error if isinstance(error, aiohttp.ClientConnectorError) else None
    return str(cause) if isinstance(cause, GuardedAddress) else None


@asynccontextmanager
async def following(http: aiohttp.ClientSession, method: str, url: URL, *, headers: dict[str, str],
                    data: bytes | None, timeout: float,
                    allowed: Callable[[URL], object]) -> AsyncIterator[aiohttp.ClientResponse]:
    """The answer to ``method url``, after at most :data:`MAX_REDIRECTS` redirects on the same
    scheme, host and port. ``allowed`` checks every URL before it is requested (raising to refuse
    it). A 303, or a 301/302 to a POST, continues with a GET without body, as browsers do."""
    for _ in range(MAX_REDIRECTS + 1):
        allowed(url)
        resp = await http.request(method, url, headers=headers, data=data, allow_redirects=False,
                                  timeout=aiohttp.ClientTimeout(total=timeout))
        location = resp.headers.get("Location") if resp.status in _REDIRECTS else None
        if location is None:
            try:
                yield resp
            finally:
                resp.release()
            return
        resp.release()
        url = _next_hop(url, location)
        if resp.status == 303 or (resp.status in (301, 302) and method == "POST"):
            method, data = "GET", None
            headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    raise LookupError(f"more than {MAX_REDIRECTS} redirects")


def _next_hop(current: URL, location: str) -> URL:
    """Where a redirect from ``current`` to ``location`` leads; LookupError when another host."""
    try:
        hop = current.join(parse_url(location)).with_fragment(None)
    except (TypeError, ValueError):
        raise LookupError(f"redirected to {location!r}, which is not a URL") from None
    if _origin(hop) != _origin(current):
        raise LookupError(f"redirected to {hop.with_user(None)}, another scheme, host or port: redirects "
                          "are followed only on the same scheme, host and port")
    return hop


def _origin(url: URL) -> tuple[str, str, int | None]:
    """Scheme, host and port of ``url`` as the connection sees them."""
    return url.scheme, (url.raw_host or "").lower().rstrip("."), url.port


async def addresses(url: str) -> list[IPAddress]:
    """Every IP address the host of ``url`` stands for (none, logged, when it cannot be resolved)."""
    host = parse_url(url).raw_host or ""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as e:
        log.warning("cannot resolve the API server's host; its addresses are not guarded",
                    extra={"host": host, "error": str(e)})
        return []
    return sorted({ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in found}, key=str)


async def read_body(resp: aiohttp.ClientResponse, limit: int, shown: str) -> bytes:
    """The (decompressed) body, refused when larger than ``limit`` bytes."""
    too_big = f"response of {shown} is larger than {limit} bytes"
    if resp.content_length is not None and resp.content_length > limit:
        raise LookupError(too_big)
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            raise LookupError(too_big)
        chunks.append(chunk)
    return b"".join(chunks)


def headers_of(resp: aiohttp.ClientResponse) -> dict[str, str]:
    """Response headers by name; repeated headers joined with ``, ``."""
    # aiohttp's keys are multidict.istr; plain str keeps them usable as JSON and in CEL.
    return {str(name): ", ".join(resp.headers.getall(name)) for name in dict.fromkeys(resp.headers.keys())}
