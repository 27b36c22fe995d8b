"""Pure renewal decisions for the webhook's CA and serving certificate ("leaf").

Everything here takes the Secret's data (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``), the
replicas' reports and the time as arguments; nothing reads a clock or the network, so every
decision can be tested with an injected ``now``.

* ``ca.crt`` is the published CA **bundle**: one PEM normally, several during a CA rotation.
  The **signer** is the bundle certificate whose key is ``ca.key``; the others are *retiring*.
* :func:`plan` returns the leader's next :class:`Step`, in this order of priority:

  1. ``NEW_CA`` when there is no usable signer (missing, unparsable, key mismatch, not an
     ECDSA CA, not yet valid) or it expires within ``ca_renew_before``. The new CA is added to
     the bundle; the old signer (and any other still-valid CA) stays in it as retiring.
  2. ``INJECT`` when the bundle differs from what was last injected into the webhook
     configurations: nothing is issued from a CA the API server does not trust yet.
  3. ``ISSUE_LEAF`` when the leaf is missing, corrupt (unparsable, key mismatch), not issued by
     the signer (so, after a new CA), lacks a wanted SAN, is not valid yet, or expires within
     ``leaf_renew_before``.
  4. ``DROP_OLD_CAS`` when retiring CAs remain and every *fresh* replica report names the
     current leaf; otherwise ``WAIT`` (the reason lists the replicas still behind).
  5. ``IDLE``.

Replica reports are annotations ``kinitiras.kcloudlabs.io/serving.<replica>`` whose value is
``{"fingerprint": <sha256 hex of the served leaf>, "time": <RFC 3339>}``; see :func:`reports`.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kinitiras_py.certs import authority

__all__ = ["ANNOTATION_DOMAIN", "CA_CERT", "CA_KEY", "KEYS", "REPORT_PREFIX", "TLS_CERT", "TLS_KEY", "Action",
           "CertPolicy", "Inspection", "Report", "Step", "ca_problem", "fingerprint", "inspect", "leaf_problem", "plan",
           "report_key", "report_value", "reports", "split_pems", "stale_report_keys", "with_new_ca", "with_new_leaf",
           "without_old_cas"]

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
KEYS = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
ANNOTATION_DOMAIN = "kinitiras.kcloudlabs.io/"
REPORT_PREFIX = ANNOTATION_DOMAIN + "serving."
_PEM_BLOCK = re.compile(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)
_PEM = serialization.Encoding.PEM
_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class CertPolicy:
    """What to issue and when to renew it."""

    dns_names: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    ca_name: str = "kinitiras-py-ca"
    ca_days: int = 3650
    leaf_days: int = 365
    ca_renew_before: dt.timedelta = dt.timedelta(days=90)
    leaf_renew_before: dt.timedelta = dt.timedelta(days=30)

    def __post_init__(self) -> None:
        if not self.dns_names and not self.ips:
            raise ValueError("the serving certificate needs at least one DNS name or IP")
        for ip in self.ips:
            ipaddress.ip_address(ip)
        if not dt.timedelta(0) < self.leaf_renew_before < dt.timedelta(days=self.leaf_days):
            raise ValueError("leaf_renew_before must be positive and shorter than leaf_days")
        if not self.leaf_renew_before < self.ca_renew_before < dt.timedelta(days=self.ca_days):
            raise ValueError("ca_renew_before must exceed leaf_renew_before and be shorter than ca_days")

    @classmethod
    def for_service(cls, service: str, namespace: str, extra_dns: tuple[str, ...] = (), ips: tuple[str, ...] = (),
                    **kwargs: object) -> CertPolicy:
        """SANs for the Service (all four forms) plus ``extra_dns`` and ``ips``."""
        names = tuple(dict.fromkeys([*authority.service_names(service, namespace), *extra_dns]))
        return cls(dns_names=names, ips=tuple(ips), **kwargs)  # type: ignore[arg-type]


def split_pems(bundle: bytes) -> list[bytes]:
    """The CERTIFICATE PEM blocks of ``bundle``, in order, each ending with a newline."""
    return [m.group(0) + b"\n" for m in _PEM_BLOCK.finditer(bundle or b"")]


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 (hex) of the certificate's DER form (what ``ReloadableTLS.fingerprint`` reports)."""
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm
        return False
    return True


@dataclass(frozen=True)
class Inspection:
    """The Secret's data, parsed; ``problems`` lists corruption (absence alone is not a problem)."""

    cas: tuple[x509.Certificate, ...] = ()
    signer: x509.Certificate | None = None
    signer_key: bytes = b""
    leaf: x509.Certificate | None = None
    leaf_pair_ok: bool = False
    leaf_issuer: x509.Certificate | None = None
    problems: tuple[str, ...] = ()
    data: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def bundle(self) -> bytes:
        """The parsed CA certificates as one normalised PEM bundle (what gets injected)."""
        return b"".join(c.public_bytes(_PEM) for c in self.cas)

    @property
    def leaf_fingerprint(self) -> str | None:
        """SHA-256 of the leaf, or None when there is no parsable leaf."""
        return fingerprint(self.leaf) if self.leaf is not None else None

    @property
    def servable(self) -> bool:
        """A replica may serve ``tls.crt``/``tls.key``: parsable, matching, chained to the bundle."""
        return self.leaf is not None and self.leaf_pair_ok and self.leaf_issuer is not None

    @property
    def empty(self) -> bool:
        """No certificate material at all (a new or placeholder Secret)."""
        return not any((self.data.get(k) or b"").strip() for k in KEYS)


def _load_key(pem: bytes) -> object:
    return serialization.load_pem_private_key(pem, password=None)


def _spki(public_key: object) -> bytes:
    return public_key.public_bytes(*_SPKI)  # type: ignore[attr-defined]


def inspect(data: Mapping[str, bytes]) -> Inspection:
    """Parse the Secret's data and find what is corrupt."""
    problems: list[str] = []
    ca_pem, ca_key, tls_crt, tls_key = (bytes(data.get(k) or b"") for k in KEYS)
    cas: list[x509.Certificate] = []
    blocks = split_pems(ca_pem)
    if ca_pem.strip() and not blocks:
        problems.append(f"{CA_CERT}: no PEM certificate")
    for block in blocks:
        try:
            cas.append(x509.load_pem_x509_certificate(block))
        except ValueError:
            problems.append(f"{CA_CERT}: an unparsable certificate")
    signer: x509.Certificate | None = None
    if ca_key.strip():
        try:
            key_spki = _spki(_load_key(ca_key).public_key())  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            problems.append(f"{CA_KEY}: not a parsable private key")
        else:
            signer = next((c for c in cas if _spki(c.public_key()) == key_spki), None)
            if signer is None and cas:
                problems.append(f"{CA_KEY}: matches no certificate in {CA_CERT}")
    leaf: x509.Certificate | None = None
    pair_ok = False
    if tls_crt.strip():
        try:
            leaf = x509.load_pem_x509_certificate(tls_crt)
        except ValueError:
            problems.append(f"{TLS_CERT}: not a parsable certificate")
    if leaf is not None:
        try:
            pair_ok = _spki(_load_key(tls_key).public_key()) == _spki(leaf.public_key())  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            problems.append(f"{TLS_KEY}: missing or not a parsable private key")
        else:
            if not pair_ok:
                problems.append(f"{TLS_KEY}: does not match {TLS_CERT}")
    elif tls_key.strip() and not tls_crt.strip():
        problems.append(f"{TLS_CERT}: missing while {TLS_KEY} is set")
    issuer = next((c for c in cas if leaf is not None and _issued_by(leaf, c)), None)
    if leaf is not None and cas and issuer is None:
        problems.append(f"{TLS_CERT}: not issued by any CA in {CA_CERT}")
    return Inspection(tuple(cas), signer, ca_key if signer is not None else b"", leaf, pair_ok, issuer,
                      tuple(problems), dict(data))


# -- replica reports --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """What one replica said it serves, and when."""

    replica: str
    fingerprint: str
    time: dt.datetime


def report_key(replica: str) -> str:
    """The annotation key for ``replica``: a valid qualified name (at most 63 characters after the
    prefix's slash), with a short hash appended when the id had to be shortened or cleaned."""
    clean = re.sub(r"[^a-z0-9._-]+", "-", replica.lower()).strip("-._") or "replica"
    name = f"serving.{clean}"
    if clean != replica or len(name) > 63:
        digest = hashlib.sha256(replica.encode()).hexdigest()[:8]
        name = f"{name[:54].rstrip('-._')}-{digest}"
    return ANNOTATION_DOMAIN + name


def report_value(fingerprint_: str, now: dt.datetime) -> str:
    """The annotation value of a report."""
    return json.dumps({"fingerprint": fingerprint_, "time": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
                      separators=(",", ":"))


def _parse_report(key: str, value: str) -> Report | None:
    try:
        doc = json.loads(value)
        when = dt.datetime.fromisoformat(str(doc["time"]).replace("Z", "+00:00"))
        fp = str(doc["fingerprint"])
    except (ValueError, KeyError, TypeError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return Report(key.removeprefix(REPORT_PREFIX), fp, when)


def reports(annotations: Mapping[str, str], now: dt.datetime, stale_after: dt.timedelta) -> dict[str, Report]:
    """Fresh reports by annotation key; reports older than ``stale_after`` (or unparsable) are ignored."""
    found: dict[str, Report] = {}
    for key, value in annotations.items():
        if key.startswith(REPORT_PREFIX):
            report = _parse_report(key, value)
            if report is not None and now - report.time <= stale_after:
                found[key] = report
    return found


def stale_report_keys(annotations: Mapping[str, str], now: dt.datetime, stale_after: dt.timedelta) -> list[str]:
    """Report annotations the leader may delete (stale or unparsable)."""
    fresh = reports(annotations, now, stale_after)
    return sorted(k for k in annotations if k.startswith(REPORT_PREFIX) and k not in fresh)


# -- the plan -------------------------------------------------------------------------------------------


class Action(enum.StrEnum):
    """What the leader does next."""

    NEW_CA = "new-ca"
    INJECT = "inject"
    ISSUE_LEAF = "issue-leaf"
    DROP_OLD_CAS = "drop-old-cas"
    WAIT = "wait"
    IDLE = "idle"


@dataclass(frozen=True)
class Step:
    """One decision of :func:`plan` and why."""

    action: Action
    reason: str = ""
    behind: tuple[str, ...] = ()
    """For WAIT: the replicas (annotation keys) not yet serving the current leaf."""


def ca_problem(ins: Inspection, now: dt.datetime, policy: CertPolicy) -> str | None:
    """Why the signer must be replaced, or None."""
    ca = ins.signer
    if ca is None:
        return "no usable CA" + (f" ({'; '.join(ins.problems)})" if ins.problems else "")
    if not isinstance(ca.public_key(), ec.EllipticCurvePublicKey) or not _is_ca(ca):
        return "the CA is not an ECDSA CA certificate"
    if now < ca.not_valid_before_utc:
        return f"the CA is not valid before {ca.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}"
    if ca.not_valid_after_utc - now <= policy.ca_renew_before:
        return f"the CA expires at {ca.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    return None


def _sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return set(san.get_values_for_type(x509.DNSName)), {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


def leaf_problem(ins: Inspection, now: dt.datetime, policy: CertPolicy) -> str | None:
    """Why a new leaf must be issued from the signer, or None."""
    leaf = ins.leaf
    if leaf is None:
        return "no serving certificate"
    if not ins.leaf_pair_ok:
        return f"{TLS_KEY} does not match {TLS_CERT}"
    if ins.signer is None or not _issued_by(leaf, ins.signer):
        return "the serving certificate is not issued by the current CA"
    dns, ips = _sans(leaf)
    missing = sorted(set(policy.dns_names) - dns) + sorted({str(ipaddress.ip_address(i)) for i in policy.ips} - ips)
    if missing:
        return f"the serving certificate lacks {', '.join(missing)}"
    if now < leaf.not_valid_before_utc:
        return "the serving certificate is not valid yet"
    if leaf.not_valid_after_utc - now <= policy.leaf_renew_before:
        return f"the serving certificate expires at {leaf.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    return None


def plan(ins: Inspection, now: dt.datetime, policy: CertPolicy, *, injected: bytes | None,
         fresh: Mapping[str, Report], force_ca: bool = False, force_leaf: bool = False) -> Step:
    """The leader's next step (see the module docstring). ``injected`` is the bundle last
    confirmed by the injection hook; ``fresh`` are the fresh replica reports."""
    why = "forced" if force_ca else ca_problem(ins, now, policy)
    if why:
        return Step(Action.NEW_CA, why)
    if injected != ins.bundle:
        return Step(Action.INJECT, "the published bundle is not injected yet")
    why = "forced" if force_leaf else leaf_problem(ins, now, policy)
    if why:
        return Step(Action.ISSUE_LEAF, why)
    if len(ins.cas) > 1:
        current = ins.leaf_fingerprint
        behind = tuple(sorted(k for k, r in fresh.items() if r.fingerprint != current))
        if behind:
            return Step(Action.WAIT, f"{len(behind)} replica(s) still serve an older certificate", behind)
        return Step(Action.DROP_OLD_CAS, f"every replica serves {current}")
    return Step(Action.IDLE)


# -- new Secret data --------------------------------------------------------------------------------------


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(_PEM)


def with_new_ca(data: Mapping[str, bytes], ins: Inspection, now: dt.datetime, policy: CertPolicy,
                also_keep: bytes = b"") -> dict[str, bytes]:
    """A new CA becomes the signer; still-valid CAs of the bundle (and of ``also_keep``, e.g. the
    last injected bundle) stay as retiring. The leaf is left alone (it is replaced after injection)."""
    retiring: dict[str, x509.Certificate] = {}
    extra = []
    for block in split_pems(also_keep):
        try:
            extra.append(x509.load_pem_x509_certificate(block))
        except ValueError:
            continue
    for ca in (*ins.cas, *extra):
        if _is_ca(ca) and ca.not_valid_after_utc > now:
            retiring.setdefault(fingerprint(ca), ca)
    new = authority.new_ca(policy.ca_name, policy.ca_days, now=now)
    out = {k: bytes(data.get(k) or b"") for k in KEYS}
    out[CA_CERT] = b"".join(_pem(c) for c in retiring.values()) + new.cert
    out[CA_KEY] = new.key
    return out


def with_new_leaf(data: Mapping[str, bytes], ins: Inspection, now: dt.datetime, policy: CertPolicy) -> dict[str, bytes]:
    """A new leaf from the signer, never outliving it; raises ValueError without a signer."""
    if ins.signer is None:
        raise ValueError("no CA to sign with")
    days = max(1, min(policy.leaf_days, (ins.signer.not_valid_after_utc - now).days))
    pair = authority.new_serving(authority.KeyPair(_pem(ins.signer), ins.signer_key), list(policy.dns_names),
                                 list(policy.ips), days=days, now=now)
    out = {k: bytes(data.get(k) or b"") for k in KEYS}
    out[CA_CERT] = ins.bundle
    out[TLS_CERT], out[TLS_KEY] = pair.cert, pair.key
    return out


def without_old_cas(data: Mapping[str, bytes], ins: Inspection) -> dict[str, bytes]:
    """The bundle reduced to the signer; raises ValueError without a signer."""
    if ins.signer is None:
        raise ValueError("no CA to keep")
    out = {k: bytes(data.get(k) or b"") for k in KEYS}
    out[CA_CERT] = _pem(ins.signer)
    return out
