"""KubeMod's ModRule (``api.kubemod.io/v1beta1``) converted into our policies.

* ``type: Patch`` becomes an OverridePolicy in the ModRule's namespace (a ClusterOverridePolicy
  when the ModRule lives in ``kubemod-system``): one rule whose plaintext operations are the
  patch, each ``lenient`` (KubeMod's JSON patch variant), with ``patchLastApplied`` (KubeMod
  patches kubectl's last-applied-configuration too) and ``executionTier`` kept.
* ``type: Reject`` becomes a ValidatePolicy (ClusterValidatePolicy) whose one rule refuses what
  its matchConditions select, with ``rejectMessage`` as its ``messageTemplate``.
* ``match`` becomes ``matchConditions`` as written (the criteria have KubeMod's semantics); a
  ``$.kind`` criterion also gives ``resourceSelectors`` by kind, so the policy is only considered
  (and the webhook only registered) for those kinds.
* ``admissionOperations`` becomes ``targetOperations`` (default CREATE and UPDATE, as KubeMod).
* In ``kubemod-system``, ``targetNamespaceRegex`` becomes a condition on the request's namespace
  (Go's unanchored match); without one the rule applies to cluster-scoped objects only.
* A patch ``value`` has KubeMod's ``.#N`` shorthand rewritten first, as KubeMod does; then without
  ``{{`` it is read as YAML now, as KubeMod reads it, and with ``{{`` it is a Go template
  translated into ``valueTemplate`` (:mod:`.gotemplate`), or reported.

KubeMod's ``node`` synthetic reference becomes the policy's ``valueRefs.node``: the Node named
by the object's ``ref.kubemod.io/node`` annotation (none without it). KubeMod also sets that
annotation itself when a pod is bound to a node; nothing here does.

A ModRule without a namespace is put in ``default``, where ``kubectl apply`` would put it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from kinitiras_py.api.policies import API_VERSION
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert import gotemplate
from kinitiras_py.convert.registry import Conversion, Problem, register
from kinitiras_py.engine.kubemod import syntax
from kinitiras_py.engine.rendering.environment import cel_string

GROUP = "api.kubemod.io"
VERSION = "v1beta1"
SYSTEM_NAMESPACE = "kubemod-system"
DEFAULT_OPERATIONS = ["CREATE", "UPDATE"]
SPEC_FIELDS = ("type", "match", "patch", "rejectMessage", "targetNamespaceRegex", "admissionOperations",
               "executionTier")
MATCH_FIELDS = ("select", "matchValue", "matchValues", "matchRegex", "matchFor", "negate")
PATCH_FIELDS = ("op", "path", "select", "value")
PATCH_OPS = ("add", "replace", "remove")
NODE_ANNOTATION = "ref.kubemod.io/node"
NODE_REF = {"from": "k8s", "k8s": {"apiVersion": "v1", "kind": "Node",
                                  "name": "{{metadata.annotations['" + NODE_ANNOTATION + "']}}"}}
"""KubeMod's node synthetic reference: the Node a pod's ``ref.kubemod.io/node`` annotation names."""
_IS_NAMESPACE = 'object.?apiVersion.orValue("") == "v1" && object.?kind.orValue("") == "Namespace"'


class _Report:
    def __init__(self, source: str, name: str) -> None:
        self.source = source
        self.name = name
        self.problems: list[Problem] = []

    def add(self, field: str, reason: str) -> None:
        self.problems.append(Problem(f"{self.source}: ModRule {self.name}", field, reason))


def _template(text: str, field: str, report: _Report) -> str | None:
    try:
        return gotemplate.translate(text)
    except gotemplate.Untranslatable as e:
        report.add(field, f"the template has no exact equivalent: {e}")
        return None


def _conditions(spec: Obj, cluster: bool, report: _Report) -> list[Obj]:
    conditions: list[Obj] = []
    regex = spec.get("targetNamespaceRegex")
    if cluster:
        if regex:
            conditions.append({"name": "targetNamespaceRegex",
                               "expression": f'request.namespace != "" && !({_IS_NAMESPACE}) '
                                             f"&& request.namespace.matches({cel_string(str(regex))})"})
        else:
            conditions.append({"name": "cluster-scoped objects only (no targetNamespaceRegex)",
                               "expression": f'request.namespace == "" || ({_IS_NAMESPACE})'})
    for i, item in enumerate(spec.get("match") or []):
        field = f"spec.match[{i}]"
        if not isinstance(item, dict):
            report.add(field, "must be an object")
            continue
        for key in item:
            if key not in MATCH_FIELDS:
                report.add(f"{field}.{key}", "unknown field")
        select = item.get("select")
        try:
            syntax.parse(select)  # type: ignore[arg-type]  # parse reports a non-string
        except syntax.SelectError as e:
            report.add(f"{field}.select", f"invalid select: {e}")
            continue
        conditions.append({k: item[k] for k in MATCH_FIELDS if k in item})
    return conditions


def _selectors(conditions: list[Obj]) -> list[Obj]:
    """Selectors by kind from a ``$.kind`` criterion (the criterion stays: selectors only make the
    policy a candidate for fewer objects, and let the webhook register for those kinds alone)."""
    for condition in conditions:
        if str(condition.get("select", "")).replace(" ", "") != "$.kind" or condition.get("negate"):
            continue
        if condition.get("matchValue") is not None:
            return [{"apiVersion": "*", "kind": str(condition["matchValue"])}]
        if condition.get("matchValues") and condition.get("matchFor", "Any") == "Any":
            return [{"apiVersion": "*", "kind": str(kind)} for kind in condition["matchValues"]]
    return []


def _patch_op(op: Any, field: str, report: _Report) -> Obj | None:
    if not isinstance(op, dict):
        report.add(field, "must be an object")
        return None
    for key in op:
        if key not in PATCH_FIELDS:
            report.add(f"{field}.{key}", "unknown field")
    if op.get("op") not in PATCH_OPS:
        report.add(f"{field}.op", f"must be one of {', '.join(PATCH_OPS)}; got {op.get('op')!r}")
        return None
    out: Obj = {"op": op["op"], "path": op.get("path"), "lenient": True}
    if op.get("select") is not None:
        out["select"] = op["select"]
    if op["op"] == "remove":
        return out
    value = op.get("value")
    if isinstance(value, str):
        value = gotemplate.expand_key_parts(value)
    if value is None:
        out["value"] = None  # KubeMod's value when none is given: null
    elif not isinstance(value, str):
        report.add(f"{field}.value", f"must be a string (YAML text), got {type(value).__name__}")
        return None
    elif gotemplate.is_template(value):
        translated = _template(value, f"{field}.value", report)
        if translated is None:
            return None
        out["valueTemplate"] = translated
    else:
        try:
            out["value"] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            report.add(f"{field}.value", f"is not YAML: {str(e).splitlines()[0]}")
            return None
    return out


def convert_modrule(doc: Obj, source: str, _all: Sequence[Obj]) -> Conversion:
    """Our policy for one ModRule, or the problems that keep it from being converted exactly."""
    meta: Obj = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    report = _Report(source, f"{namespace}/{name}")
    if str(doc.get("apiVersion")) != f"{GROUP}/{VERSION}":
        report.add("apiVersion", f"only {GROUP}/{VERSION} is known")
    if not name:
        report.add("metadata.name", "required")
    spec: Obj = doc["spec"] if isinstance(doc.get("spec"), dict) else {}
    for key in spec:
        if key not in SPEC_FIELDS:
            report.add(f"spec.{key}", "unknown field")
    kind = spec.get("type")
    if kind not in ("Patch", "Reject"):
        report.add("spec.type", f"must be Patch or Reject; got {kind!r}")
    cluster = namespace == SYSTEM_NAMESPACE
    conditions = _conditions(spec, cluster, report)
    operations = spec.get("admissionOperations") or DEFAULT_OPERATIONS
    new_meta: Obj = {"name": name}
    if not cluster:
        new_meta["namespace"] = namespace
    if meta.get("labels"):
        new_meta["labels"] = dict(meta["labels"])
    new_meta["annotations"] = {**(meta.get("annotations") or {}),
                               "kinitiras.kcloudlabs.io/converted-from": f"ModRule {namespace}/{name}"}
    policy: Obj = {"apiVersion": API_VERSION, "kind": "", "metadata": new_meta}
    if kind == "Patch":
        ops = [_patch_op(op, f"spec.patch[{i}]", report) for i, op in enumerate(spec.get("patch") or [])]
        if not spec.get("patch"):
            report.add("spec.patch", "a Patch ModRule needs at least one operation")
        policy["kind"] = "ClusterOverridePolicy" if cluster else "OverridePolicy"
        policy["spec"] = {
            "resourceSelectors": _selectors(conditions),
            "matchConditions": conditions,
            "executionTier": spec.get("executionTier") or 0,
            "overrideRules": [{"targetOperations": list(operations), "patchLastApplied": True,
                               "overriders": {"plaintext": [op for op in ops if op is not None]}}],
        }
    elif kind == "Reject":
        message = spec.get("rejectMessage")
        if spec.get("patch"):
            report.add("spec.patch", "a Reject ModRule has no patch")
        text = (_template(message, "spec.rejectMessage", report) if isinstance(message, str)
                else f"rejected by ModRule {namespace}/{name}")
        policy["kind"] = "ClusterValidatePolicy" if cluster else "ValidatePolicy"
        policy["spec"] = {"resourceSelectors": _selectors(conditions), "matchConditions": conditions,
                          "validateRules": [{"targetOperations": list(operations), "messageTemplate": text or ""}]}
        if spec.get("executionTier"):
            report.add("spec.executionTier", "tiers order patches; a Reject ModRule has no patch to order "
                                             "(validate policies run after every override policy)")
    if "syntheticRefs" in str(spec) and "node" in str(spec) and isinstance(policy.get("spec"), dict):
        if not cluster:
            report.add("spec", f"$.syntheticRefs.node reads a Node, which is cluster-scoped: a policy in namespace "
                               f"{namespace} may not read it (docs/security.md); a ModRule in {SYSTEM_NAMESPACE} "
                               "becomes a cluster policy, which may")
        policy["spec"]["valueRefs"] = {"node": NODE_REF}
    if report.problems:
        return Conversion(problems=report.problems)
    return Conversion(documents=[policy])


register(GROUP, ("ModRule",), convert_modrule)
