"""The egress setting: prefixes on the normalized URL, guarded addresses, namespaced policies."""

from __future__ import annotations

import ipaddress

import pytest

from kinitiras_py.refs.egress import AllowEntry, Egress, EgressRefused, guarded, literal_address, target

ALLOWED = Egress.parse(["http://allowed.example.com", "https://api.example.com:8443/v1/", "http://10.0.0.7:9000/q"],
                       namespaced=True)


def refused(egress: Egress, url: str, namespaced: bool = True) -> str:
    """The refusal's message (the test fails when the URL passes)."""
    with pytest.raises(EgressRefused) as err:
        egress.check(url, namespaced)
    return str(err.value)


# ---- prefixes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "http://allowed.example.com/",
    "http://allowed.example.com",
    "http://ALLOWED.Example.COM/anything?x=1#f",
    "http://allowed.example.com./trailing-dot",
    "http://allowed.example.com:80/explicit-default-port",
    "http://user:pw@allowed.example.com/userinfo-is-not-the-host",
    "https://api.example.com:8443/v1/",
    "https://api.example.com:8443/v1/teams/a",
    "https://api.example.com:8443/v1/x/../y",  # resolved to /v1/y before matching
    "http://10.0.0.7:9000/q",
    "http://10.0.0.7:9000/q/sub",
])
def test_urls_under_an_allowed_prefix_pass(url: str) -> None:
    assert ALLOWED.check(url, True).host in ("allowed.example.com", "api.example.com", "10.0.0.7")


@pytest.mark.parametrize("url", [
    "http://allowed.example.com@evil/",
    "http://allowed.example.com:@evil.net/",
    "http://allowed.example.com.evil.net/",
    "http://evil.net/allowed.example.com",
    "http://evil.net/?http://allowed.example.com",
    "http://evil.net/#http://allowed.example.com",
    "http://xallowed.example.com/",
    "https://allowed.example.com/",  # another scheme
    "http://allowed.example.com:8080/",  # another port
    "https://api.example.com/v1/",  # port 443, not 8443
    "https://api.example.com:8443/v1",  # the prefix ends with a slash
    "https://api.example.com:8443/v10/",
    "https://api.example.com:8443/v1/../admin",
    "https://api.example.com:8443/v1/%2e%2e/admin",
    "http://10.0.0.7:9000/qq",  # /q matches /q and /q/..., not /qq
    "http://10.0.0.70:9000/q",
    "http://[::ffff:10.0.0.7]:9000/q",  # the same address written another way is not the entry
])
def test_near_misses_are_refused(url: str) -> None:
    assert "under no allowed prefix" in refused(ALLOWED, url)


@pytest.mark.parametrize(("url", "reason"), [
    ("https://api.example.com:8443/v1/a%2F..%2F..%2Fadmin", "dot segments hidden behind encoded separators"),
    ("https://api.example.com:8443/v1/a%5C..%5Cadmin", "dot segments hidden behind encoded separators"),
    ("https://api.example.com:8443/v1/..;/admin", "dot segments hidden behind encoded separators or path parameters"),
    ("http://2130706433/", "legacy notation"),
    ("http://0x7f.1/", "legacy notation"),
    ("http://0x7f000001/", "legacy notation"),
    ("http://017700000001/", "legacy notation"),
    ("http://127.1/", "legacy notation"),
    ("http://127.000.000.001/", "legacy notation"),
    ("ftp://allowed.example.com/", "not an absolute http or https URL"),
    ("/relative/path", "not an absolute http or https URL"),
    ("http://./x", "not an absolute http or https URL"),
    ("http://[::1/", "not a valid URL"),
    ("http://./", "not an absolute http or https URL"),
])
def test_urls_that_cannot_be_compared_safely_are_refused(url: str, reason: str) -> None:
    assert reason in refused(Egress(), url, False)


def test_the_refusal_shows_the_url_without_its_password() -> None:
    message = refused(ALLOWED, "http://bob:s3cret@evil.net/x")
    assert "s3cret" not in message and "bob" not in message
    assert message.startswith("url http://evil.net/x is refused: it is under no allowed prefix (http://allowed")
    assert "--http-allow PREFIX" in message


@pytest.mark.parametrize(("text", "problem"), [
    ("allowed.example.com", "not an absolute http or https URL"),
    ("http://user@allowed.example.com/", "no user info, query or fragment"),
    ("http://allowed.example.com/?q=1", "no user info, query or fragment"),
    ("http://allowed.example.com/#f", "no user info, query or fragment"),
    ("http://0x7f.1:8080/", "legacy notation"),
])
def test_bad_prefixes_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        AllowEntry.parse(text)


def test_namespaced_policies_need_a_prefix() -> None:
    with pytest.raises(ValueError, match="--http-namespaced needs at least one --http-allow PREFIX"):
        Egress.parse([], namespaced=True)


# ---- who may call what -------------------------------------------------------------------------

def test_namespaced_policies_are_refused_by_default() -> None:
    message = refused(Egress(), "https://example.com/api")
    assert "http references are off for namespaced policies" in message
    assert "--http-namespaced and --http-allow PREFIX" in message
    # With prefixes but without --http-namespaced, namespaced policies are still refused.
    assert "off for namespaced policies" in refused(Egress.parse(["https://example.com"]), "https://example.com/api")


def test_cluster_policies_call_anything_without_prefixes_and_only_the_prefixes_with_some() -> None:
    assert Egress().check("https://example.com/api", False).host == "example.com"
    limited = Egress.parse(["https://example.com/api/"])
    assert limited.check("https://example.com/api/x", False).path == "/api/x"
    assert "under no allowed prefix" in refused(limited, "https://example.com/other", False)


# ---- guarded addresses -------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "kind"), [
    ("http://127.0.0.1/", "loopback"),
    ("http://127.9.9.9:8080/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback address 127.0.0.1 (written ::ffff:7f00:1)"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[0:0:0:0:0:ffff:7f00:0001]/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/iam/security-credentials/node", "link-local"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://[::]/", "unspecified"),
])
def test_guarded_literals_are_refused_whatever_is_allowed(url: str, kind: str) -> None:
    message = refused(Egress(), url, False)
    assert kind in message and "unless an --http-allow entry names that address" in message


def test_an_entry_naming_the_address_exactly_opens_it() -> None:
    egress = Egress.parse(["http://127.0.0.1:8080/", "http://[::1]:8080/api/"], namespaced=True)
    assert egress.check("http://127.0.0.1:8080/x", True).ip == ipaddress.ip_address("127.0.0.1")
    assert egress.check("http://[::1]:8080/api/v", True).ip == ipaddress.ip_address("::1")
    assert "under no allowed prefix" in refused(egress, "http://127.0.0.2:8080/x")
    assert "under no allowed prefix" in refused(egress, "http://localhost:8080/x")
    # Another spelling of the address is another host: the entry names 127.0.0.1, not ::ffff:7f00:1.
    assert "under no allowed prefix" in refused(egress, "http://[::ffff:127.0.0.1]:8080/x")


def test_a_host_name_entry_never_opens_a_guarded_address() -> None:
    # localhost names loopback, but only by what a resolver answers: the resolver refuses it
    # (see test_outbound), so the entry is accepted without opening anything.
    egress = Egress.parse(["http://localhost:8080/"])
    assert egress.check("http://localhost:8080/", False).ip is None
    assert egress.screen(ipaddress.ip_address("127.0.0.1")) == "loopback address 127.0.0.1"


def test_the_api_servers_addresses_are_guarded() -> None:
    egress = Egress().with_api_server([ipaddress.ip_address("10.96.0.1"), ipaddress.ip_address("::ffff:10.1.2.3")])
    assert "API server address 10.96.0.1" in refused(egress, "https://10.96.0.1/api/v1/secrets", False)
    assert "API server address 10.96.0.1" in refused(egress, "https://[::ffff:10.96.0.1]:6443/", False)
    assert "API server address 10.1.2.3" in refused(egress, "https://10.1.2.3/", False)
    assert egress.check("https://10.96.0.2/", False).host == "10.96.0.2"
    opened = Egress.parse(["https://10.96.0.1:443/healthz"]).with_api_server([ipaddress.ip_address("10.96.0.1")])
    assert opened.check("https://10.96.0.1/healthz", False).port == 443


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback address 127.0.0.1"),
    ("::1", "loopback address ::1"),
    ("::ffff:127.0.0.1", "loopback address 127.0.0.1 (written ::ffff:7f00:1)"),
    ("169.254.0.1", "link-local address 169.254.0.1"),
    ("fe80::abcd", "link-local address fe80::abcd"),
    ("0.0.0.0", "unspecified address 0.0.0.0"),
    ("::", "unspecified address ::"),
    ("10.0.0.1", None),
    ("192.0.2.2", None),
    ("2001:db8::1", None),
    ("::ffff:8.8.8.8", None),
])
def test_guarded(address: str, reason: str | None) -> None:
    assert guarded(ipaddress.ip_address(address)) == reason


# ---- normalization -----------------------------------------------------------------------------

@pytest.mark.parametrize(("host", "address"), [
    ("10.1.2.3", "10.1.2.3"),
    ("::ffff:7f00:1", "::ffff:7f00:1"),
    ("example.com", None),
    ("cafe.be", None),
    ("1.2.3.4.example", None),
])
def test_literal_address(host: str, address: str | None) -> None:
    found = literal_address(host)
    assert (str(found) if found else None) == address


def test_target_normalizes_what_decides_the_destination() -> None:
    found = target("HTTP://Bob@Example.COM.:80/a/./b/../c?q=1#frag")
    assert (found.scheme, found.host, found.port, found.path, found.ip) == ("http", "example.com", 80, "/a/c", None)
    assert target("https://bücher.example/").host == "xn--bcher-kva.example"
    assert target("http://[::FFFF:127.0.0.1]:81").host == "::ffff:7f00:1"
