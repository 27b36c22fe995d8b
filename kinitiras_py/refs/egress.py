"""Which URLs ``from: http`` references may call, and which addresses the webhook never connects to.

The operator decides, not the policies: ``serve --http-allow PREFIX`` (repeatable) and
``--http-namespaced``, the same flags on ``apply``, ``render`` and ``test``. The rules:

- a namespaced policy (OverridePolicy, ValidatePolicy) may make no request unless
  ``--http-namespaced`` is given, and then only under an allowed prefix;
- with at least one prefix configured, cluster policies are held to the prefixes too; without
  any, they may call any http or https URL (what they always could);
- whatever is allowed, loopback, link-local and unspecified addresses and the API server's own
  addresses are never connected to, unless the request's URL matched an allow entry whose host is
  that very IP address, written literally. A host name never opens them: its answers can change
  between the check and the connection (DNS rebinding), so :mod:`.outbound` checks every address a
  name resolves to and connects only to those it checked.

Prefixes match the parsed, normalized URL: scheme, host (lower case, IDNA, no trailing dot,
canonical IP), port (the scheme's default when omitted) and path, segment by segment. The user
info, query and fragment of the URL play no part, so ``http://allowed.example.com@evil/`` is a
request to ``evil``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from yarl import URL

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.urls import parse_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_FLAG = "--http-allow"
NAMESPACED_FLAG = "--http-namespaced"

GUARDED: tuple[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network], ...] = (
    ("loopback", ipaddress.ip_network("127.0.0.0/8")),
    ("loopback", ipaddress.ip_network("::1/128")),
    ("link-local", ipaddress.ip_network("169.254.0.0/16")),
    ("link-local", ipaddress.ip_network("fe80::/10")),
    ("unspecified", ipaddress.ip_network("0.0.0.0/8")),
    ("unspecified", ipaddress.ip_network("::/128")),
)
"""Addresses that reach the webhook's own host or its cloud's metadata service."""

# What glibc's inet_aton reads as an IPv4 address: one to four decimal, octal or hex parts.
_NUMERIC_HOST = re.compile(r"(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?", re.IGNORECASE)


class EgressRefused(KinitirasError, LookupError):
    """A request the operator's setting forbids; the message names the URL (when known), says why
    (``reason``) and what would allow it."""

    def __init__(self, reason: str, url: str = "") -> None:
        self.reason = reason
        self.url = url
        super().__init__(f"url {url} is refused: {reason}" if url else reason)


@dataclass(frozen=True)
class Target:
    """A URL reduced to what decides where a request goes."""

    scheme: str
    host: str
    """Lower case, IDNA-encoded, without a trailing dot; an IP address in its canonical form."""
    port: int
    path: str
    """Percent-encoded as sent, dot segments resolved, at least ``/``."""
    ip: IPAddress | None
    """The address, when the host is an IP literal."""

    @property
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: what a redirect may not change."""
        return self.scheme, self.host, self.port

    def under(self, prefix: Target) -> bool:
        """Whether this URL lies under ``prefix`` (same origin; the path equal or below it)."""
        if self.origin != prefix.origin:
            return False
        if prefix.path.endswith("/") or self.path == prefix.path:
            return self.path.startswith(prefix.path)
        return self.path.startswith(prefix.path + "/")


def literal_address(host: str) -> IPAddress | None:
    """The IP address ``host`` (as yarl gives it) names literally, or None for a host name.

    Raises EgressRefused for an IPv4 address in a legacy notation (``2130706433``, ``0x7f.1``,
    ``127.1``, leading zeros): resolvers read those differently, so they are never compared.
    """
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise EgressRefused(f"host {host} is not a valid IPv6 address") from None
    if not _NUMERIC_HOST.fullmatch(host):
        return None
    try:
        return ipaddress.IPv4Address(host)
    except ValueError:
        raise EgressRefused(f"host {host} is an IPv4 address in a legacy notation; write it as four "
                            "decimal numbers (a.b.c.d)") from None


def target(url: URL | str) -> Target:
    """``url`` parsed and normalized; EgressRefused when it is not an absolute http or https URL
    that can be compared safely."""
    try:
        parsed = url if isinstance(url, URL) else parse_url(url)
    except (TypeError, ValueError) as e:
        raise EgressRefused(f"{url!r} is not a valid URL: {e}") from None
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise EgressRefused("it is not an absolute http or https URL")
    host = parsed.raw_host.lower()
    if host.endswith(".") and ":" not in host:
        host = host[:-1]
    if not host:  # "http://./": the root of DNS names no host
        raise EgressRefused("it is not an absolute http or https URL")
    ip = literal_address(host)
    if ip is not None:
        host = str(ip)
    # yarl resolves literal dot segments; encoded separators, or a path parameter (``..;``, which
    # Java servers drop), could form new ones on the server.
    if any(part.split(";", 1)[0] in (".", "..") for part in re.split(r"[/\\]", parsed.path)):
        raise EgressRefused("its path has dot segments hidden behind encoded separators or path parameters")
    if parsed.port is None:
        raise EgressRefused("it has no port")
    return Target(parsed.scheme, host, parsed.port, parsed.raw_path or "/", ip)


def guarded(ip: IPAddress, api_server: frozenset[IPAddress] = frozenset()) -> str | None:
    """Why the webhook never connects to ``ip`` (e.g. ``loopback address 127.0.0.1``), or None.
    An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) counts as the IPv4 address it carries."""
    plain = _plain(ip)
    shown = f"{plain}" if plain == ip else f"{plain} (written {ip})"
    for name, network in GUARDED:
        if plain.version == network.version and plain in network:
            return f"{name} address {shown}"
    if plain in api_server:
        return f"API server address {shown}"
    return None


def _plain(ip: IPAddress) -> IPAddress:
    """``ip`` without an IPv6 zone, an IPv4-mapped address as its IPv4 address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.scope_id:
            return ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    return ip


@dataclass(frozen=True)
class AllowEntry:
    """One ``--http-allow`` prefix."""

    text: str
    prefix: Target

    @classmethod
    def parse(cls, text: str) -> AllowEntry:
        """The entry ``text`` names; ValueError saying what is wrong with it."""
        try:
            url = parse_url(text)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{text!r} is not a URL: {e}") from None
        if url.user is not None or url.password is not None or url.query_string or url.fragment:
            raise ValueError(f"{text!r}: a prefix has no user info, query or fragment")
        try:
            return cls(text, target(url))
        except EgressRefused as e:
            raise ValueError(f"{text!r}: {e}") from None


@dataclass(frozen=True)
class Egress:
    """The operator's setting for ``http`` references; see the module docstring."""

    allow: tuple[AllowEntry, ...] = ()
    namespaced: bool = False
    """Whether namespaced policies may use ``http`` references (under :attr:`allow` only)."""
    api_server: frozenset[IPAddress] = frozenset()
    """The API server's addresses (IPv4-mapped ones as IPv4, without zones), guarded like loopback."""

    @classmethod
    def parse(cls, prefixes: Iterable[str] = (), namespaced: bool = False,
              api_server: Iterable[IPAddress] = ()) -> Egress:
        """The setting from the flags' values; ValueError naming a bad prefix or a missing one."""
        allow = tuple(AllowEntry.parse(text) for text in prefixes)
        if namespaced and not allow:
            raise ValueError(f"{NAMESPACED_FLAG} needs at least one {ALLOW_FLAG} PREFIX: namespaced "
                             "policies may only call allowed prefixes")
        return cls(allow, namespaced, frozenset(map(_plain, api_server)))

    def with_api_server(self, addresses: Iterable[IPAddress]) -> Egress:
        """This setting with the API server's ``addresses`` guarded too."""
        return Egress(self.allow, self.namespaced, self.api_server | frozenset(map(_plain, addresses)))

    def check(self, url: URL | str, namespaced: bool) -> Target:
        """``url``'s target when a policy (namespaced or not) may call it; EgressRefused otherwise,
        naming the URL, the rule broken and the setting that would allow it."""
        shown = _shown(url)
        try:
            found = target(url)
        except EgressRefused as e:
            raise EgressRefused(e.reason, shown) from None
        if namespaced and not self.namespaced:
            raise EgressRefused("http references are off for namespaced policies; the operator allows them "
                                f"with {NAMESPACED_FLAG} and {ALLOW_FLAG} PREFIX", shown)
        entry = next((e for e in self.allow if found.under(e.prefix)), None)
        if entry is None and (self.allow or namespaced):
            allowed = ", ".join(e.text for e in self.allow)
            raise EgressRefused(f"it is under no allowed prefix ({allowed}); the operator allows more with "
                                f"{ALLOW_FLAG} PREFIX", shown)
        if found.ip is not None:
            reason = guarded(found.ip, self.api_server)
            if reason is not None and (entry is None or entry.prefix.ip is None):
                raise EgressRefused(f"the webhook never connects to the {reason} unless an {ALLOW_FLAG} "
                                    f"entry names that address, e.g. {found.scheme}://{_host(found)}:{found.port}/",
                                    shown)
        return found

    def screen(self, ip: IPAddress) -> str | None:
        """Why a resolved address is never connected to (host names never open one), or None."""
        return guarded(ip, self.api_server)


def _host(found: Target) -> str:
    """The host as written in a URL (IPv6 in brackets)."""
    return f"[{found.host}]" if ":" in found.host else found.host


def _shown(url: URL | str) -> str:
    """``url`` for messages, without user info (which may hold a password)."""
    try:
        parsed = url if isinstance(url, URL) else parse_url(url)
        return (str(parsed.with_user(None)) if parsed.absolute else str(parsed)) or repr(str(url))
    except (TypeError, ValueError):
        return repr(url)
