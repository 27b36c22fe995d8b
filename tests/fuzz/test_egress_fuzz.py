"""Fuzz: policies whose http references name random URLs, admitted and then run, against a listener
that counts every connection.

URLs are built from allowed prefixes and near misses: user info tricks, hosts that extend an
allowed one, IPv4 in legacy notations (``2130706433``, ``0x7f.1``, ``127.1``), IPv6 spellings of
loopback and link-local (``[::ffff:7f00:1]``), other ports and schemes, dot segments plain and
encoded, and ``{{placeholders}}`` filled from the object's annotations with more of the same.
Every host name resolves to the listener: to this machine's outside address when it has one (so
a name the prefixes should refuse would be connected to if they did not), else to 127.0.0.1.
Each policy is admitted (the verdict must name the field when it refuses), then run whatever the
verdict (as a policy stored before the setting existed would be), as a namespaced and as a
cluster policy, with and without an allow list. Invariants:

* with the allow list (``http://127.0.0.1:<port>/allowed/`` and
  ``http://cmdb.example.com:<port>/allowed/``), every request the listener receives has one of
  those hosts and a path under ``/allowed/`` however the server decodes it;
* a request arrives on the loopback address only through the entry naming 127.0.0.1;
* namespaced policies make no request at all unless ``--http-namespaced`` is in force;
* nothing crashes: admission returns a verdict, the rule applies or fails with a message naming
  the policy and the rule.

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import asyncio
import ipaddress
import posixpath
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from hypothesis import example, given
from hypothesis import strategies as st

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.admission.policies import admit_policy
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.refs.egress import AllowEntry, Egress, EgressRefused
from kinitiras_py.refs.http import AiohttpClient
from tests.listener import Counts, Seen, counting_listener, local_address

HOSTS = ["127.0.0.1", "127.0.0.2", "localhost", "LOCALHOST", "2130706433", "0x7f.1", "0x7f000001", "017700000001",
         "127.1", "127.0.1", "0177.0.0.1", "127.000.000.001", "[::1]", "[::ffff:7f00:1]", "[::ffff:127.0.0.1]",
         "[0:0:0:0:0:ffff:7f00:1]", "[::127.0.0.1]", "[fe80::1]", "[fe80::1%25lo]", "169.254.169.254",
         "[::ffff:a9fe:a9fe]", "2852039166", "0.0.0.0", "0", "[::]", "cmdb.example.com", "cmdb.example.com.",
         "CMDB.Example.com", "cmdb.example.com.evil.net", "evil.net", "127.0.0.1.nip.io", "xn--cmdb-0qa.example.com",
         "{{metadata.annotations.host}}", "127.0.0.1{{metadata.annotations.host}}"]
USERINFO = ["", "", "cmdb.example.com@", "127.0.0.1@", "u:p@", "127.0.0.1:PORT@", "@"]
PORTS = ["", ":PORT", ":PORT", ":80", ":0PORT", ":OTHER", ":", ":65536", ":{{metadata.annotations.port}}"]
PATHS = ["/allowed/x", "/allowed/", "/allowed", "/allowedx", "/allowed/../secret", "/allowed/%2e%2e/secret",
         "/allowed%2F..%2Fsecret", "/allowed/a%2F..%2F..%2Fsecret", "/allowed/..%5Csecret", "/allowed/..;/secret",
         "/allowed/.;x/..;/..;/secret", "/secret", "//allowed/",
         "/ALLOWED/x", "", "/allowed/{{metadata.annotations.path}}", "{{metadata.annotations.path}}",
         "/api/team", "/api/../allowed/x"]
TAILS = ["", "", "?a=1", "#frag", "?@evil.net", "?next=http://evil.net/", "#@evil.net"]
FILLS = ["evil.net", "127.0.0.1", "../secret", "x@evil.net", "allowed/../../secret", "%2e%2e/secret", "a/b",
         ".evil.net", "@evil.net", ":1", "[::1]", "", "allowed/x", "PORT", "80", "x#", "x?y=1", "\u2028", "é"]


HERE = local_address()


class Everything(AbstractResolver):
    """Every host name resolves to the listener's address (outside address, else loopback)."""

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        return [{"hostname": host, "host": HERE or "127.0.0.1", "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": 0}]

    async def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def listener() -> Iterator[Counts]:
    with counting_listener("0.0.0.0" if HERE else "127.0.0.1") as counts:
        yield counts


def policy(kind: str, url: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "fetch"}
    if not kind.startswith("Cluster"):
        meta["namespace"] = "team-a"
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": kind, "metadata": meta,
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}], "overrideRules": [{
                "overriders": {"template": {"type": "annotations", "operation": "add", "path": "got",
                                            "valueRef": {"from": "http", "path": "body.path",
                                                         "http": {"url": url, "timeoutSeconds": 1}}}}}]}}


PARTS = {"scheme": ["https", "HTTP", "ftp", "http:", ""], "userinfo": USERINFO, "host": HOSTS, "port": PORTS,
         "path": PATHS, "tail": TAILS}


@st.composite
def urls(draw: st.DrawFn, port: int) -> str:
    """An allowed URL with one to three of its parts swapped for a near miss, or random text now and then."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.text(max_size=40))
    parts = {"scheme": "http", "userinfo": "", "host": draw(st.sampled_from(["127.0.0.1", "cmdb.example.com"])),
             "port": ":PORT", "path": "/allowed/x", "tail": ""}
    for name in draw(st.sets(st.sampled_from(sorted(PARTS)), min_size=1, max_size=3)):
        parts[name] = draw(st.sampled_from(PARTS[name]))
    text = "{scheme}://{userinfo}{host}{port}{path}{tail}".format(**parts)
    return text.replace("PORT", str(port)).replace("OTHER", str(port + 1 if port < 65535 else port - 1))


def allowed(seen: Seen, port: int) -> bool:
    """Whether a request is one the allow list lets through: an allowed host, a path under /allowed/,
    and the loopback address reached only as 127.0.0.1."""
    if seen.host not in (f"127.0.0.1:{port}", f"cmdb.example.com:{port}"):
        return False
    if ipaddress.ip_address(seen.address).is_loopback and seen.host != f"127.0.0.1:{port}":
        return False
    return allowed_path(seen.line)


def allowed_path(line: str) -> bool:
    """Whether a request line asks for a path under /allowed/ however the server decodes it."""
    parts = line.split(" ")
    if len(parts) < 2:
        return False
    path = parts[1].split("?", 1)[0].split("#", 1)[0]
    # As a lenient server may read it: decoded, backslashes as separators, path parameters dropped.
    decoded = posixpath.normpath("/".join(p.split(";", 1)[0] for p in unquote(path).replace("\\", "/").split("/")))
    return path.startswith("/allowed/") and (decoded + "/").startswith("/allowed/")


async def run_policy(doc: dict[str, Any], egress: Egress, annotations: dict[str, str]) -> str | None:
    """Run the policy on a ConfigMap; the value read from the answer, or None when the rule failed."""
    try:
        compiled = compile_policy(doc)
    except PolicyErrors:
        return None  # a URL the schema refuses never runs
    async with AiohttpClient(egress, resolver=Everything(), cache_ttl=0) as http:
        pipeline = Pipeline(PolicyIndex([compiled]), PolicyIndex(), StaticStore(), http, lookup_timeout=1.5)
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "x", "namespace": "team-a", "annotations": annotations}}
        mutation = await pipeline.mutate(Request("CREATE", cm, namespace="team-a"))
    if mutation.failure is not None:
        assert str(mutation.failure).startswith("policy ") and ", rule 0: " in str(mutation.failure)
        return None
    return str((mutation.object["metadata"].get("annotations") or {}).get("got"))


def egresses(port: int) -> list[Egress]:
    """No setting; the allow list for cluster policies only; the allow list for every policy."""
    prefixes = [f"http://127.0.0.1:{port}/allowed/", f"http://cmdb.example.com:{port}/allowed/"]
    return [Egress(), Egress.parse(prefixes), Egress.parse(prefixes, namespaced=True)]


def check(listener: Counts, url: str, annotations: dict[str, str]) -> None:
    """Admit and run ``url`` in every setting and as both scopes; assert the invariants above."""
    port = listener.port
    for egress in egresses(port):
        for kind in ("OverridePolicy", "ClusterOverridePolicy"):
            doc = policy(kind, url)
            before = listener.snapshot()
            verdict = admit_policy(Request("CREATE", doc, namespace="team-a"), egress)
            if verdict.error is not None and " is refused: " in verdict.error:
                assert ".valueRef.http.url: " in verdict.error, verdict.error
            got = asyncio.run(run_policy(doc, egress, annotations))
            with listener.lock:
                new = listener.requests[before[1]:]
            assert len(new) <= 1, new
            if kind == "OverridePolicy" and not egress.namespaced:
                assert listener.snapshot() == before, (url, new)
            elif egress.allow:
                assert all(allowed(seen, port) for seen in new), (url, annotations, new)
                assert got is None or got.startswith("/allowed/"), (url, got)
            else:
                # Anything goes for cluster policies without prefixes, but loopback.
                assert not any(ipaddress.ip_address(seen.address).is_loopback for seen in new), (url, new)


@given(data=st.data())
def test_no_url_outside_the_allow_list_is_ever_requested(listener: Counts, data: st.DataObject) -> None:
    port = listener.port
    url = data.draw(urls(port), label="url")
    annotations = {name: data.draw(st.sampled_from(FILLS), label=name).replace("PORT", str(port))
                   for name in ("host", "port", "path")}
    check(listener, url, annotations)


def test_every_single_near_miss(listener: Counts) -> None:
    # Hypothesis favours the first choices; each near miss alone, on both allowed hosts, for certain.
    port = listener.port
    fills = {"host": "127.0.0.1", "port": str(port), "path": "../secret"}
    for host in ("127.0.0.1", "cmdb.example.com"):
        for name, choices in PARTS.items():
            for choice in choices:
                parts = {"scheme": "http", "userinfo": "", "host": host, "port": ":PORT", "path": "/allowed/x",
                         "tail": "", name: choice}
                url = "{scheme}://{userinfo}{host}{port}{path}{tail}".format(**parts)
                check(listener, url.replace("PORT", str(port)).replace("OTHER", str(port + 1)), fills)


def test_the_allowed_prefix_is_reached_so_the_fuzz_can_fail(listener: Counts) -> None:
    # Without this, a listener nothing can reach would make the property above hold trivially.
    before = listener.snapshot()
    egress = egresses(listener.port)[2]
    hosts = ["127.0.0.1", "cmdb.example.com"] if HERE else ["127.0.0.1"]
    for kind in ("OverridePolicy", "ClusterOverridePolicy"):
        for host in hosts:
            doc = policy(kind, f"http://{host}:{listener.port}/allowed/{{{{metadata.annotations.path}}}}")
            assert admit_policy(Request("CREATE", doc, namespace="team-a"), egress).error is None
            assert asyncio.run(run_policy(doc, egress, {"path": "x"})) == "/allowed/x"
    assert listener.snapshot() == (before[0] + 2 * len(hosts), before[1] + 2 * len(hosts))
    assert all(allowed(seen, listener.port) for seen in listener.requests[before[1]:])
    assert not allowed_path("GET /allowed/..%2Fsecret HTTP/1.1") and not allowed_path("GET /secret HTTP/1.1")


URLISH = st.one_of(st.text(max_size=60), st.builds(
    "{}://{}{}{}".format, st.sampled_from(["http", "https", "HTTP", "x"]),
    st.text(alphabet="abc019.:@[]%-_xX/?#\\", max_size=20), st.sampled_from(["", ":80", ":0", ":99999", ":x"]),
    st.text(alphabet="/.%2eEfF5cC?#a", max_size=15)))


@given(text=URLISH, namespaced=st.booleans())
@example(text="http://[]@", namespaced=False)  # yarl raised IndexError
def test_any_prefix_or_url_text_gets_an_answer_not_a_crash(text: str, namespaced: bool) -> None:
    # --http-allow values and filled URLs are user input: a refusal or a target, nothing else.
    try:
        entry = AllowEntry.parse(text)
    except ValueError as e:
        assert str(e).startswith(repr(text))
    else:
        assert entry.prefix.scheme in ("http", "https") and entry.prefix.path.startswith("/")
    for egress in (Egress(), Egress.parse(["http://127.0.0.1:8080/allowed/"], namespaced=True)):
        try:
            found = egress.check(text, namespaced)
        except EgressRefused as e:
            assert str(e).startswith("url ") and " is refused: " in str(e)
        else:
            assert found.scheme in ("http", "https") and found.host
