"""js-admissions-controller (``momiji.com``) → our policies.

A ``JsAdmission`` (the project's CRD names the kind ``JsAdmissions``; its README writes the
singular: both are accepted) becomes, in its namespace, an ``OverridePolicy`` when its script
defines ``jsa_mutate`` and a ``ValidatePolicy`` when it defines ``jsa_validate``; a
``ClusterJsAdmission(s)`` becomes the cluster kinds. The script is carried as it is, in a
``javascript`` rule: our rules keep the project's contract (parameters by name,
``{Allowed, Message, Result}``), and policies made only of such rules keep its order
(namespaced admissions, then cluster ones, each by name).

``spec.kinds`` lists resources (``pods``, ``v1/pods``, ``apps/v1/deployments``); each becomes a
resource selector. A resource we cannot name the kind of is reported, never dropped. The watch
hooks (``jsa_init``, ``jsa_created``, ``jsa_updated``, ``jsa_deleted``) and ``state`` are kept
by our javascript rules (:mod:`kinitiras_py.engine.rules.jshooks`), and an override policy carries
js-admissions' marker annotation (``jsadmissions.momiji.com/mutate``) as its rule's ``marker``.
"""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.api.policies import API_VERSION
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert.registry import Conversion, Problem, register
from kinitiras_py.engine.evaluation import jsruntime
from kinitiras_py.engine.rules import jshooks, jsrules

GROUP = "momiji.com"
NAMESPACED = ("JsAdmission", "JsAdmissions")
CLUSTER = ("ClusterJsAdmission", "ClusterJsAdmissions")
RESOURCES: dict[str, tuple[str, str]] = {
    "pods": ("v1", "Pod"), "services": ("v1", "Service"), "configmaps": ("v1", "ConfigMap"),
    "secrets": ("v1", "Secret"), "serviceaccounts": ("v1", "ServiceAccount"), "namespaces": ("v1", "Namespace"),
    "nodes": ("v1", "Node"), "persistentvolumeclaims": ("v1", "PersistentVolumeClaim"),
    "persistentvolumes": ("v1", "PersistentVolume"), "podtemplates": ("v1", "PodTemplate"),
    "replicationcontrollers": ("v1", "ReplicationController"), "endpoints": ("v1", "Endpoints"),
    "deployments": ("apps/v1", "Deployment"), "statefulsets": ("apps/v1", "StatefulSet"),
    "daemonsets": ("apps/v1", "DaemonSet"), "replicasets": ("apps/v1", "ReplicaSet"),
    "jobs": ("batch/v1", "Job"), "cronjobs": ("batch/v1beta1", "CronJob"),
    "ingresses": ("networking.k8s.io/v1", "Ingress"),
    "networkpolicies": ("networking.k8s.io/v1", "NetworkPolicy"),
}
"""Plural resource names of built-in kinds, at the version Kubernetes 1.20 serves."""
_KNOWN = (jsrules.MUTATE, jsrules.VALIDATE, *jsrules.HOOKS)
MARKER = "jsadmissions.momiji.com/mutate"
"""The annotation js-admissions-controller sets to the admissions whose jsa_mutate returned a Result."""


def _selector(entry: object, index: int, source: str, problems: list[Problem]) -> Obj | None:
    """The resource selector for one ``spec.kinds`` entry, in any of the forms the project resolves
    through discovery: ``resource``, ``version/resource`` (any group serving it at that version) and
    ``group/version/resource``; the resource plural or singular, in any case. ``resource.group``
    is ours too (kubectl's spelling)."""
    where = f"spec.kinds[{index}]"
    if not isinstance(entry, str) or not entry.strip():
        problems.append(Problem(source, where, f"must be a resource name such as pods, v1/pods or apps/v1/deployments; "
                                f"got {entry!r}"))
        return None
    parts = entry.strip().split("/", 2)
    group: str | None = None
    version = parts[-2] if len(parts) > 1 else None
    if len(parts) == 3:
        group = parts[0]
    name = parts[-1].lower()
    if len(parts) == 1 and "." in name:
        name, _, group = name.partition(".")
    found = RESOURCES.get(name) or next((v for v in RESOURCES.values() if v[1].lower() == name), None)
    if found is None or not name or not all(parts):
        problems.append(Problem(source, where, f"{entry!r} is not a built-in resource whose kind is known here "
                                "(the forms are resource, version/resource and group/version/resource); write the "
                                "policy's resourceSelectors by hand"))
        return None
    served_group, _, served_version = found[0].rpartition("/")
    if (group is not None and group != served_group) or (version is not None and version != served_version):
        problems.append(Problem(source, where, f"{entry!r}: {found[1]} is known here at {found[0]} only "
                                f"(write {found[0]}/{name} or just {name}), or write the policy's "
                                "resourceSelectors by hand"))
        return None
    return {"apiVersion": found[0], "kind": found[1]}


def _script(js: str, source: str, problems: list[Problem]) -> dict[str, tuple[str, ...]]:
    """The functions the script defines, with their parameters; problems for what we cannot keep."""
    script = jsruntime.Script(js)
    try:
        script.load(_KNOWN)
    except jsruntime.JsError as e:
        line = f"line {e.line}: " if isinstance(e, jsruntime.JsLoadError) and e.line else ""
        problems.append(Problem(source, "spec.js", f"{line}{e.reason}"))
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for name in _KNOWN:
        if script.types.get(name) != "function":
            continue
        try:
            found[name] = jsrules.parameters_of(script.texts.get(name, ""), name,
                                                jshooks.PARAMETERS.get(name, jsrules.PARAMETERS))
        except ValueError as e:
            problems.append(Problem(source, f"spec.js: {name}", str(e)))
    if jsrules.MUTATE not in found and jsrules.VALIDATE not in found and not problems:
        problems.append(Problem(source, "spec.js", "defines neither jsa_mutate nor jsa_validate"))
    return found


def convert(doc: Obj, source: str, _all: Sequence[Obj]) -> Conversion:
    """One JsAdmission or ClusterJsAdmission as an override and/or a validate policy."""
    out = Conversion()
    kind = str(doc.get("kind"))
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = meta.get("name") if isinstance(meta, dict) else None
    label = f"{source}: {kind} {name or '(no name)'}"
    if not isinstance(name, str) or not name:
        out.problems.append(Problem(label, "metadata.name", "required"))
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        out.problems.append(Problem(label, "spec", "required: kinds and js"))
        return out
    kinds = spec.get("kinds")
    if not isinstance(kinds, list) or not kinds:
        out.problems.append(Problem(label, "spec.kinds", "required: the resources the admission applies to"))
        kinds = []
    found = [s for i, entry in enumerate(kinds) if (s := _selector(entry, i, label, out.problems))]
    selectors = [dict(pair) for pair in dict.fromkeys(tuple(s.items()) for s in found)]  # v1/pods and pods: once
    for field in sorted(set(spec) - {"kinds", "js"}):
        out.problems.append(Problem(label, f"spec.{field}", "unknown field: nothing to convert it to"))
    js = spec.get("js")
    if not isinstance(js, str) or not js.strip():
        out.problems.append(Problem(label, "spec.js", "required: the script"))
        return out
    functions = _script(js, label, out.problems)
    cluster = kind in CLUSTER
    metadata: Obj = {"name": name}
    if not cluster and isinstance(meta, dict) and meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    if jsrules.MUTATE in functions:
        # js-admissions names a namespaced admission <namespace>.<name> in its marker.
        entry = str(name) if cluster or not metadata.get("namespace") else f"{metadata['namespace']}.{name}"
        script = {"source": js, "marker": {"annotation": MARKER, "name": entry}}
        out.documents.append({
            "apiVersion": API_VERSION, "kind": "ClusterOverridePolicy" if cluster else "OverridePolicy",
            "metadata": dict(metadata),
            "spec": {"resourceSelectors": selectors, "overrideRules": [{"overriders": {"javascript": script}}]}})
    if jsrules.VALIDATE in functions:
        out.documents.append({
            "apiVersion": API_VERSION, "kind": "ClusterValidatePolicy" if cluster else "ValidatePolicy",
            "metadata": dict(metadata),
            "spec": {"resourceSelectors": selectors, "validateRules": [{"javascript": {"source": js}}]}})
    return out


register(GROUP, NAMESPACED + CLUSTER, convert)
