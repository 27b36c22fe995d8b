"""Rule results → PolicyReport and ClusterPolicyReport objects, in the policy working group's shape.

One object's results go into reports of their own (as Kyverno lays them out): a PolicyReport in
the object's namespace, or a ClusterPolicyReport for a cluster-scoped object, named after the
object's uid, labelled as ours and owned by the object (the garbage collector removes them with
it). No report grows past the API server's size limit: a report holds at most
:data:`MAX_RESULTS` results, each message at most :data:`MESSAGE_CHARS` characters, so one
report stays far below a MiB whatever the policies say; an object with more results gets more
parts (``<uid>``, ``<uid>-1``, ...), each with its own summary, so the columns of ``kubectl get``
add up.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from kinitiras_py.admission.results import ObjectResult, ResourceRef, RuleResult
from kinitiras_py.api.reports import API_VERSION, RESULTS
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.policies.results import PolicyId

SOURCE = "kinitiras-py"
MAX_RESULTS = 100
"""Results per report: with messages bounded (:data:`MESSAGE_CHARS`) and names bounded by
Kubernetes, a report stays under 1 MiB (etcd stores objects of up to 1.5 MiB)."""
MESSAGE_CHARS = 1024
"""Characters of a rule's message kept in a report (longer ones end with an ellipsis)."""
MANAGED_BY = "app.kubernetes.io/managed-by"
RESOURCE_UID = "kinitiras.kcloudlabs.io/resource-uid"
"""Label: the uid of the object a report is about (every part of its reports carries it)."""
PART = "kinitiras.kcloudlabs.io/report-part"
"""Label: which part of the object's reports this is (0, 1, ...)."""
DIGEST = "kinitiras.kcloudlabs.io/digest"
"""Annotation: a digest of the results but their timestamps; a new leader skips writing a report
that already says the same."""
KINDS = ("PolicyReport", "ClusterPolicyReport")


@dataclass(frozen=True)
class Stamped:
    """A rule result and when it was found (Unix seconds)."""

    result: RuleResult
    when: float


def policy_name(policy: PolicyId) -> str:
    """How a result names its policy: ``namespace/name`` for the namespaced kinds, ``name`` otherwise
    (the kind is in the result's properties)."""
    return f"{policy.namespace}/{policy.name}" if policy.namespace else policy.name


def rule_name(result: RuleResult) -> str:
    """How a result names its rule: its list and index in the policy, ``validateRules[0]``."""
    return f"{'overrideRules' if result.type == 'override' else 'validateRules'}[{result.rule}]"


def _message(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "…"


def _timestamp(when: float) -> Obj:
    seconds = int(when // 1)
    return {"seconds": seconds, "nanos": min(round((when - seconds) * 1e9), 999_999_999)}


def reference(resource: ResourceRef, uid: str) -> Obj:
    """The object as an ObjectReference (empty fields left out)."""
    ref: Obj = {"apiVersion": resource.api_version, "kind": resource.kind, "namespace": resource.namespace,
                "name": resource.name, "uid": uid}
    return {key: value for key, value in ref.items() if value}


def entry(stamped: Stamped, resource: ResourceRef, uid: str) -> Obj:
    """One ``results`` entry."""
    one = stamped.result
    out: Obj = {
        "source": SOURCE,
        "policy": policy_name(one.policy),
        "rule": rule_name(one),
        "result": one.result,
        "scored": True,
        "timestamp": _timestamp(stamped.when),
        "resources": [reference(resource, uid)],
        "properties": {"policyKind": one.policy.kind, "ruleType": one.type},
    }
    if one.message:  # left out when empty: server-side apply of 1.20 turns "" into a null it refuses
        out["message"] = _message(one.message)
    return out


def summary(entries: Iterable[Obj]) -> dict[str, int]:
    """Counts of ``entries`` by result (every result present, zeros too)."""
    counts = dict.fromkeys(RESULTS, 0)
    for one in entries:
        counts[one["result"]] += 1
    return counts


def order(results: Iterable[Stamped]) -> list[Stamped]:
    """Results in a stable order: by policy kind, namespace, name, rule type and index."""
    return sorted(results, key=lambda s: (s.result.policy.kind, s.result.policy.namespace or "",
                                          s.result.policy.name, s.result.type, s.result.rule))


def digest(results: Sequence[Stamped]) -> str:
    """A digest of what ``results`` say, timestamps aside (the same results found again digest alike)."""
    said = [(s.result.policy.kind, s.result.policy.namespace, s.result.policy.name, s.result.type, s.result.rule,
             s.result.result, _message(s.result.message)) for s in order(results)]
    return hashlib.sha256(orjson.dumps(said)).hexdigest()[:32]


def report_name(key: str, part: int) -> str:
    """The name of part ``part`` of the reports of the object ``key`` (its uid)."""
    return key if part == 0 else f"{key}-{part}"


def offline_key(resource: ResourceRef) -> str:
    """A name for an object without a uid (read from a file): derived from its identity."""
    text = f"{resource.api_version}/{resource.kind}/{resource.namespace}/{resource.name}"
    return "kinitiras-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def build_reports(resource: ResourceRef, uid: str, results: Sequence[Stamped], *,
                  key: str | None = None, max_results: int = MAX_RESULTS) -> list[Obj]:
    """The reports of one object: none without results, else one part per ``max_results``.

    Named after ``key`` (default ``uid``); owned by the object when ``uid`` is known.
    """
    if not results:
        return []
    name_key = key or uid
    if not name_key:
        raise ValueError(f"{resource}: a report needs the object's uid or a key")
    entries = [entry(s, resource, uid) for s in order(results)]
    kind = "PolicyReport" if resource.namespace else "ClusterPolicyReport"
    said = digest(results)
    reports = []
    for part, start in enumerate(range(0, len(entries), max_results)):
        chunk = entries[start:start + max_results]
        meta: Obj = {"name": report_name(name_key, part),
                     "labels": {MANAGED_BY: SOURCE, RESOURCE_UID: uid or name_key, PART: str(part)}}
        if part == 0:
            meta["annotations"] = {DIGEST: said}
        if resource.namespace:
            meta["namespace"] = resource.namespace
        if uid:
            meta["ownerReferences"] = [{"apiVersion": resource.api_version, "kind": resource.kind,
                                        "name": resource.name, "uid": uid}]
        reports.append({"apiVersion": API_VERSION, "kind": kind, "metadata": meta,
                        "scope": reference(resource, uid), "summary": summary(chunk), "results": chunk})
    return reports


def offline_reports(objects: Sequence[ObjectResult], when: float) -> list[Obj]:
    """The reports of an offline run (``apply --policy-report``): one set per object with results,
    named after the object's uid, or its identity when it has none."""
    out: list[Obj] = []
    for obj in objects:
        stamped = [Stamped(one, when) for one in obj.rules]
        uid = str(((obj.decision.object.get("metadata") or {}) if isinstance(obj.decision.object, dict)
                   else {}).get("uid") or "")
        out += build_reports(obj.resource, uid, stamped, key=uid or offline_key(obj.resource))
    return out
