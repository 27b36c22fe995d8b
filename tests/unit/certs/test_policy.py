"""Renewal decisions with an injected clock: windows, the CA rotation state machine, reports, corruption."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from kinitiras_py.certs import authority
from kinitiras_py.certs import policy as p
from kinitiras_py.certs.policy import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, Action

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)
MINUTE = dt.timedelta(minutes=1)
POLICY = p.CertPolicy.for_service("hook", "ns", ips=("127.0.0.1",))
STALE = dt.timedelta(hours=3)


def issued(ca_at: dt.datetime = T0, leaf_at: dt.datetime | None = None) -> dict[str, bytes]:
    """Secret data with a CA issued at ``ca_at`` and a leaf issued at ``leaf_at`` (default: same time)."""
    data = p.with_new_ca({}, p.inspect({}), ca_at, POLICY)
    return p.with_new_leaf(data, p.inspect(data), leaf_at or ca_at, POLICY)


def decide(data: dict[str, bytes], now: dt.datetime, *, injected: bytes | None = None,
           fresh: dict[str, p.Report] | None = None, **force: bool) -> p.Step:
    ins = p.inspect(data)
    return p.plan(ins, now, POLICY, injected=ins.bundle if injected is None else injected, fresh=fresh or {},
                  **force)


def report(replica: str, data: dict[str, bytes], at: dt.datetime) -> tuple[str, p.Report]:
    fp = p.inspect(data).leaf_fingerprint
    assert fp is not None
    return p.report_key(replica), p.Report(replica, fp, at)


# -- windows ----------------------------------------------------------------------------------------------


def test_leaf_is_renewed_30_days_before_expiry_not_31() -> None:
    data = issued()
    expiry = p.inspect(data).leaf.not_valid_after_utc  # type: ignore[union-attr]
    assert expiry == T0 + 365 * DAY
    assert decide(data, expiry - 31 * DAY).action == Action.IDLE
    step = decide(data, expiry - 29 * DAY)
    assert step.action == Action.ISSUE_LEAF and "expires" in step.reason


def test_ca_is_renewed_90_days_before_expiry_not_91() -> None:
    ca_expiry = T0 + 3650 * DAY
    for days_left, action in ((91, Action.IDLE), (89, Action.NEW_CA)):
        now = ca_expiry - days_left * DAY
        data = issued(T0, leaf_at=now)  # a fresh leaf, so only the CA can be due
        assert decide(data, now).action == action, days_left


def test_leaf_never_outlives_its_ca() -> None:
    now = T0 + 3650 * DAY - 100 * DAY
    leaf = p.inspect(issued(T0, leaf_at=now)).leaf
    assert leaf is not None and leaf.not_valid_after_utc <= T0 + 3650 * DAY


def test_a_missing_san_or_a_not_yet_valid_leaf_is_reissued() -> None:
    data = issued()
    wider = p.CertPolicy.for_service("hook", "ns", ips=("127.0.0.1", "10.0.0.7"))
    ins = p.inspect(data)
    step = p.plan(ins, T0, wider, injected=ins.bundle, fresh={})
    assert step.action == Action.ISSUE_LEAF and "10.0.0.7" in step.reason
    early = issued(T0, leaf_at=T0 + 10 * DAY)
    step = decide(early, T0 + DAY)
    assert step.action == Action.ISSUE_LEAF and "not valid yet" in step.reason
    assert decide(data, T0 - 2 * dt.timedelta(hours=1)).action == Action.NEW_CA  # nor is the CA


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        p.CertPolicy()
    with pytest.raises(ValueError):
        p.CertPolicy(dns_names=("a",), leaf_days=20)
    with pytest.raises(ValueError):
        p.CertPolicy(dns_names=("a",), ca_renew_before=dt.timedelta(days=10))
    with pytest.raises(ValueError):
        p.CertPolicy(ips=("not-an-ip",))
    assert POLICY.dns_names == ("hook", "hook.ns", "hook.ns.svc", "hook.ns.svc.cluster.local")


# -- bootstrap and forced steps ---------------------------------------------------------------------------


def test_bootstrap_publishes_the_ca_then_injects_then_issues_the_leaf() -> None:
    ins = p.inspect({})
    assert ins.empty and not ins.problems
    assert p.plan(ins, T0, POLICY, injected=None, fresh={}).action == Action.NEW_CA
    data = p.with_new_ca({}, ins, T0, POLICY)
    ins = p.inspect(data)
    assert ins.signer is not None and len(ins.cas) == 1 and ins.leaf is None
    assert p.plan(ins, T0, POLICY, injected=None, fresh={}).action == Action.INJECT
    assert p.plan(ins, T0, POLICY, injected=ins.bundle, fresh={}).action == Action.ISSUE_LEAF
    data = p.with_new_leaf(data, ins, T0, POLICY)
    assert p.inspect(data).servable
    assert decide(data, T0).action == Action.IDLE


def test_forced_rotations() -> None:
    data = issued()
    assert decide(data, T0, force_leaf=True).action == Action.ISSUE_LEAF
    assert decide(data, T0, force_ca=True).action == Action.NEW_CA
    assert decide(data, T0, injected=b"", force_leaf=True).action == Action.INJECT  # injection comes first


# -- CA rotation with two replicas --------------------------------------------------------------------------


def test_ca_rotation_state_machine_with_two_replicas() -> None:
    now = T0 + 3650 * DAY - 89 * DAY
    data = issued(T0, leaf_at=now - 200 * DAY)
    old = p.inspect(data)
    injected = old.bundle
    fresh = dict([report("a", data, now), report("b", data, now)])
    step = p.plan(old, now, POLICY, injected=injected, fresh=fresh)
    assert step.action == Action.NEW_CA and "expires" in step.reason

    # (1) publish old + new; the old leaf still chains to the bundle, so replicas keep serving it.
    data = p.with_new_ca(data, old, now, POLICY)
    ins = p.inspect(data)
    assert len(ins.cas) == 2 and ins.signer is not None and ins.signer != old.signer
    assert ins.servable and ins.leaf_issuer == old.signer and not ins.problems
    assert data[TLS_CERT] == old.data[TLS_CERT]
    # (2) nothing is issued before the bundle is injected.
    assert p.plan(ins, now, POLICY, injected=injected, fresh=fresh).action == Action.INJECT
    injected = ins.bundle
    # (3) then the leaf comes from the new CA.
    step = p.plan(ins, now, POLICY, injected=injected, fresh=fresh)
    assert step.action == Action.ISSUE_LEAF and "not issued by the current CA" in step.reason
    data = p.with_new_leaf(data, ins, now, POLICY)
    ins = p.inspect(data)
    assert ins.leaf_issuer == ins.signer and len(ins.cas) == 2
    # (4) replica a reloaded, b not yet: wait for b.
    fresh.update([report("a", data, now)])
    step = p.plan(ins, now, POLICY, injected=injected, fresh=fresh)
    assert step.action == Action.WAIT and step.behind == (p.report_key("b"),)
    # (5) b reloaded: drop the old CA, then inject the smaller bundle.
    fresh.update([report("b", data, now)])
    assert p.plan(ins, now, POLICY, injected=injected, fresh=fresh).action == Action.DROP_OLD_CAS
    data = p.without_old_cas(data, ins)
    ins = p.inspect(data)
    assert len(ins.cas) == 1 and ins.servable
    assert p.plan(ins, now, POLICY, injected=injected, fresh=fresh).action == Action.INJECT
    assert p.plan(ins, now, POLICY, injected=ins.bundle, fresh=fresh).action == Action.IDLE


def test_stale_replicas_are_ignored() -> None:
    now = T0 + 10 * DAY
    old_data = issued()
    data = p.with_new_ca(old_data, p.inspect(old_data), now, POLICY)
    data = p.with_new_leaf(data, p.inspect(data), now, POLICY)
    annotations = {
        p.report_key("live"): p.report_value(p.inspect(data).leaf_fingerprint or "", now - 5 * MINUTE),
        p.report_key("gone"): p.report_value(p.inspect(old_data).leaf_fingerprint or "", now - 4 * HOUR),
        p.report_key("junk"): "not json",
        "unrelated/annotation": "x",
    }
    fresh = p.reports(annotations, now, STALE)
    assert list(fresh) == [p.report_key("live")]
    assert p.stale_report_keys(annotations, now, STALE) == sorted([p.report_key("gone"), p.report_key("junk")])
    ins = p.inspect(data)
    assert p.plan(ins, now, POLICY, injected=ins.bundle, fresh=fresh).action == Action.DROP_OLD_CAS
    # within the staleness window the same replica holds the rotation back
    fresh = p.reports(annotations, now - 2 * dt.timedelta(hours=1), STALE)
    assert p.plan(ins, now, POLICY, injected=ins.bundle, fresh=fresh).action == Action.WAIT


def test_report_keys_are_valid_annotation_names() -> None:
    name = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
    ids = ["webhook-7d9f8-abcde", "Pod_Name.With:Odd/Chars", "x" * 200, "-"]
    keys = [p.report_key(i) for i in ids]
    assert keys[0] == "kinitiras.kcloudlabs.io/serving.webhook-7d9f8-abcde"
    assert len(set(keys)) == len(keys)
    for key in keys:
        prefix, _, local = key.partition("/")
        assert prefix == "kinitiras.kcloudlabs.io" and len(local) <= 63 and name.match(local), key
    assert p.reports({keys[0]: p.report_value("ab", T0)}, T0, STALE)[keys[0]].replica == "webhook-7d9f8-abcde"


# -- corruption ---------------------------------------------------------------------------------------------


def test_a_mismatched_pair_is_a_problem_repaired_by_a_new_leaf() -> None:
    data = issued()
    other = issued()
    data[TLS_KEY] = other[TLS_KEY]
    ins = p.inspect(data)
    assert not ins.servable and ins.problems == (f"{TLS_KEY}: does not match {TLS_CERT}",)
    assert decide(data, T0).action == Action.ISSUE_LEAF
    repaired = p.with_new_leaf(data, ins, T0, POLICY)
    assert p.inspect(repaired).servable and decide(repaired, T0).action == Action.IDLE


@pytest.mark.parametrize(("key", "value", "problem", "action"), [
    (TLS_CERT, b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", "tls.crt: not a parsable",
     Action.ISSUE_LEAF),
    (TLS_KEY, b"garbage", "tls.key: missing or not a parsable", Action.ISSUE_LEAF),
    (CA_KEY, b"garbage", "ca.key: not a parsable", Action.NEW_CA),
    (CA_CERT, b"garbage", "ca.crt: no PEM certificate", Action.NEW_CA),
])
def test_corruption_is_reported_and_planned_for(key: str, value: bytes, problem: str, action: Action) -> None:
    data = issued()
    data[key] = value
    ins = p.inspect(data)
    assert any(pr.startswith(problem) for pr in ins.problems), ins.problems
    assert decide(data, T0).action == action


def test_a_leaf_from_a_foreign_ca_is_not_servable() -> None:
    data = issued()
    foreign = authority.new_serving(authority.new_ca(), ["hook"], [])
    data[TLS_CERT], data[TLS_KEY] = foreign.cert, foreign.key
    ins = p.inspect(data)
    assert ins.leaf_pair_ok and not ins.servable
    assert "tls.crt: not issued by any CA in ca.crt" in ins.problems


def test_a_new_ca_keeps_valid_old_cas_even_from_the_injected_bundle() -> None:
    data = issued()
    old_bundle = p.inspect(data).bundle
    data[CA_CERT] = b"garbage"
    ins = p.inspect(data)
    fresh = p.with_new_ca(data, ins, T0, POLICY, also_keep=old_bundle)
    kept = p.inspect(fresh)
    assert len(kept.cas) == 2 and kept.servable  # the served leaf still chains while the new CA rolls out
    # expired CAs are not kept
    later = p.with_new_ca(data, ins, T0 + 3651 * DAY, POLICY, also_keep=old_bundle)
    assert len(p.inspect(later).cas) == 1
