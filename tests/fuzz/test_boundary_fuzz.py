"""Fuzz: namespaced policies never read outside their namespace (issue 26).

Policies in ``team-a`` get references at every place one can be written (a template's
``valueRef``, policy-wide ``valueRefs``, a condition's ``dataRef``, a sidecar's ``valueRefs`` and
``configMapRef``, ``http.auth.secretRef``), naming other namespaces, cluster-scoped kinds and
placeholders the object fills in. Objects are admitted against a store holding the same objects
in every namespace, each outside one carrying a marker value.

Invariant: the policy is accepted or refused by field (as in test_policies_fuzz.py); when
accepted, admission never raises, every read that reaches the store is in ``team-a`` (or is
``team-a``'s own Namespace), every Secret the http client is told to read is in ``team-a``, and
no marker value ends up in the object or a message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.api import policies
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from tests.fuzz.test_policies_fuzz import TEXT, check

OWN = "team-a"
NAMESPACES = [OWN, "team-b", "kube-system"]
MARKER = "LEAKED-FROM-"
KINDS = [("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Namespace"), ("v1", "Node"), ("apps/v1", "ReplicaSet"),
         ("cert-manager.io/v1", "ClusterIssuer"), ("rbac.authorization.k8s.io/v1", "ClusterRole")]
CLUSTER_KINDS = {"Namespace", "Node", "ClusterIssuer", "ClusterRole"}
NAMES = ["x", OWN, "team-b", "{{metadata.labels.pick}}", "{{metadata.name}}", "{{metadata.namespace}}"]
REF_NAMESPACES = st.sampled_from([None, OWN, "team-b", "kube-system", "{{metadata.labels.pick}}",
                                  "{{metadata.namespace}}", "{{metadata.labels.missing}}", "team-{{metadata.name}}"])


def _objects() -> list[dict[str, Any]]:
    """Every kind, named after every name, in every namespace (cluster-scoped: once); the outside
    ones carry the marker."""
    found = []
    for api_version, kind in KINDS:
        for name in ("x", *NAMESPACES):
            for ns in ([None] if kind in CLUSTER_KINDS else NAMESPACES):
                own = ns == OWN or (kind == "Namespace" and name == OWN)
                meta: dict[str, Any] = {"name": name, "labels": {"v": "ours" if own else MARKER + "label"}}
                if ns is not None:
                    meta["namespace"] = ns
                found.append({"apiVersion": api_version, "kind": kind, "metadata": meta,
                              "data": {"v": "ours" if own else f"{MARKER}{ns}"}})
    return found


class WatchedStore:
    """The objects above; each read that reaches it, and the scopes discovery would report."""

    def __init__(self) -> None:
        self.inner = StaticStore(_objects())
        self.reads: list[tuple[str, str | None, str | None]] = []

    async def namespaced(self, _api_version: str, kind: str) -> bool:
        return kind not in CLUSTER_KINDS

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.reads.append((kind, namespace, name))
        return await self.inner.get(api_version, kind, namespace, name)

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[dict[str, Any]]:
        self.reads.append((kind, namespace, None))
        return await self.inner.list(api_version, kind, namespace)


class WatchedHttp:
    """Answers every request; the Secrets it is told to read credentials from."""

    def __init__(self) -> None:
        self.secret_namespaces: list[Any] = []

    async def fetch(self, spec: dict[str, Any], namespaced: bool) -> dict[str, Any]:
        secret = ((spec.get("auth") or {}).get("secretRef")) or None
        if secret is not None:
            self.secret_namespaces.append(secret.get("namespace"))
        return {"body": {"v": "ours"}, "header": {}}


@st.composite
def references(draw: st.DrawFn) -> dict[str, Any]:
    """A value reference of any source, its namespace and name from the lists above or any text."""
    source = draw(st.sampled_from(["k8s", "k8s", "k8s", "owner", "http"]))
    ref: dict[str, Any] = {"from": source, "path": draw(st.sampled_from(["/data/v", "/metadata/labels/v"]))}
    if source == "k8s":
        api_version, kind = draw(st.sampled_from(KINDS))
        k8s: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
        if draw(st.booleans()):
            k8s["name"] = draw(st.sampled_from(NAMES) | TEXT)
        else:
            k8s["labelSelector"] = {"matchLabels": draw(st.sampled_from([{}, {"v": "ours"}]))}
        namespace = draw(REF_NAMESPACES | TEXT)
        if namespace is not None:
            k8s["namespace"] = namespace
        ref["k8s"] = k8s
    elif source == "http":
        secret: dict[str, Any] = {"name": "x"}
        namespace = draw(REF_NAMESPACES)
        if namespace is not None:
            secret["namespace"] = namespace
        ref["http"] = {"url": "https://x.example/", "auth": {"secretRef": secret}}
    return ref


@st.composite
def namespaced_policies(draw: st.DrawFn) -> dict[str, Any]:
    """An OverridePolicy or a ValidatePolicy in team-a reading through references at every site."""
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}]}
    if draw(st.booleans()):
        spec["valueRefs"] = {"shared": draw(references())}
    if draw(st.booleans()):
        condition = {"cond": "Equal", "dataRef": draw(references()), "value": {"string": "never"}, "message": "m"}
        spec["validateRules"] = [{"failurePolicy": draw(st.sampled_from(["Fail", "Ignore"])),
                                  "template": {"type": "condition", "condition": condition}}]
        kind = "ValidatePolicy"
    else:
        template = {"type": "annotations", "operation": "add", "path": "copied", "valueRef": draw(references())}
        rules = [{"failurePolicy": draw(st.sampled_from(["Fail", "Ignore"])), "overriders": {"template": template}}]
        if draw(st.booleans()):
            spec["resourceSelectors"].append({"apiVersion": "v1", "kind": "Pod"})
            sidecar: dict[str, Any] = {"valueRefs": {"v": draw(references())}}
            if draw(st.booleans()):
                sidecar["configMapRef"] = {"name": "x", "key": "t",
                                           **({"namespace": ns} if (ns := draw(REF_NAMESPACES)) else {})}
            else:
                sidecar["template"] = "containers: [{name: s, image: '{{ valueRefs.v }}'}]"
            rules.append({"failurePolicy": "Ignore", "overriders": {"template": {
                "type": "sidecar", "operation": "add", "sidecar": sidecar}}})
        spec["overrideRules"] = rules
        kind = "OverridePolicy"
    return {"apiVersion": policies.API_VERSION, "kind": kind, "metadata": {"name": "p", "namespace": OWN},
            "spec": spec}


@st.composite
def admitted_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A ConfigMap or Pod of team-a whose labels, name and owner lead placeholders anywhere."""
    meta: dict[str, Any] = {"name": draw(st.sampled_from(["x", "team-b", "kube-system", OWN])),
                            "labels": {"pick": draw(st.sampled_from([*NAMESPACES, "x", "", "{{"]))}}
    if draw(st.booleans()):
        meta["namespace"] = OWN
    if draw(st.booleans()):
        api_version, kind = draw(st.sampled_from(KINDS))
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "controller": True,
                                    "name": draw(st.sampled_from(["x", *NAMESPACES]))}]
    kind = draw(st.sampled_from(["ConfigMap", "Pod"]))
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": meta}
    if kind == "Pod":
        obj["spec"] = {"containers": [{"name": "app", "image": "app"}]}
    return obj


@given(namespaced_policies(), admitted_objects())
def test_namespaced_policies_never_read_outside_their_namespace(policy: dict[str, Any], obj: dict[str, Any]) -> None:
    check(policy)
    try:
        compiled = compile_policy(policy)
    except PolicyErrors:
        return
    store, http = WatchedStore(), WatchedHttp()
    overrides = PolicyIndex([] if compiled.validating else [compiled])
    validations = PolicyIndex([compiled] if compiled.validating else [])
    pipeline = Pipeline(overrides, validations, store, http)
    decision = asyncio.run(pipeline.admit(Request("CREATE", obj, namespace=OWN)))
    outside = [r for r in store.reads if r[1] != OWN and r != ("Namespace", None, OWN)
               and not (r[0] == "Namespace" and r[1] is None and r[2] is None)]
    assert outside == [], outside
    assert all(ns == OWN for ns in http.secret_namespaces), http.secret_namespaces
    said = json.dumps([decision.object, decision.message, decision.warnings, decision.audit])
    assert MARKER not in said, said
