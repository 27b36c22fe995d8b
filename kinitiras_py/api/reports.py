"""The ``wgpolicyk8s.io/v1alpha2`` PolicyReport and ClusterPolicyReport CRDs, written from the
policy working group's documented schema.

Reports carry the results of policies on objects (``results``), their counts (``summary``) and
what they are about (``scope``); kinitiras-py writes them (``kinitiras_py.reports``) and tools
such as Policy Reporter read them. The printer columns make ``kubectl get policyreport -A`` show
the counts per result.
"""

from __future__ import annotations

from kinitiras_py.base.typedefs import Obj

GROUP = "wgpolicyk8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
RESULTS = ("pass", "fail", "warn", "error", "skip")
"""Every result a report entry may hold, in the order the summary and the columns list them."""
SEVERITIES = ("critical", "high", "low", "medium", "info")


def _string(description: str) -> Obj:
    return {"description": description, "type": "string"}


def _object_reference(description: str) -> Obj:
    """core/v1 ObjectReference: which object (all fields optional)."""
    fields = {
        "apiVersion": "API version of the object.",
        "kind": "Kind of the object.",
        "namespace": "Namespace of the object (empty for cluster-scoped objects).",
        "name": "Name of the object.",
        "uid": "UID of the object.",
        "resourceVersion": "The object's resourceVersion the result was found on.",
        "fieldPath": "A field inside the object, when the result is about one part of it.",
    }
    return {"description": description, "type": "object",
            "properties": {name: _string(text) for name, text in fields.items()}}


def _label_selector(description: str) -> Obj:
    """meta/v1 LabelSelector."""
    expression = {
        "description": "One requirement: a label key, an operator and values.",
        "type": "object",
        "required": ["key", "operator"],
        "properties": {
            "key": _string("The label key."),
            "operator": _string("In, NotIn, Exists or DoesNotExist."),
            "values": {"description": "Values for In and NotIn.", "type": "array", "items": {"type": "string"}},
        },
    }
    return {"description": description, "type": "object", "properties": {
        "matchLabels": {"description": "Labels the objects carry, all of them.", "type": "object",
                        "additionalProperties": {"type": "string"}},
        "matchExpressions": {"description": "Requirements the labels meet, all of them.", "type": "array",
                             "items": expression},
    }}


def _result() -> Obj:
    """One entry of ``results``: a rule of a policy on some objects."""
    return {
        "description": "The result of one rule of one policy on the objects it names.",
        "type": "object",
        "required": ["policy"],
        "properties": {
            "source": _string("Who produced the result (kinitiras-py writes kinitiras-py)."),
            "policy": _string("The policy the rule belongs to."),
            "rule": _string("The rule, within the policy."),
            "category": _string("A category the policy belongs to (optional)."),
            "severity": {**_string("How severe a failure of the rule is (optional)."), "enum": list(SEVERITIES)},
            "timestamp": {
                "description": "When the result was found.",
                "type": "object",
                "required": ["seconds", "nanos"],
                "properties": {
                    "seconds": {"description": "Seconds since the Unix epoch.", "type": "integer",
                                "format": "int64"},
                    "nanos": {"description": "Nanoseconds within the second (0 to 999,999,999).",
                              "type": "integer", "format": "int32"},
                },
            },
            "result": {**_string("pass, fail, warn, error or skip."), "enum": list(RESULTS)},
            "scored": {"description": "Whether the result counts towards a score.", "type": "boolean"},
            "resources": {"description": "The objects the result is about.", "type": "array",
                          "items": _object_reference("One object the result is about.")},
            "resourceSelector": _label_selector("The objects the result is about, by their labels."),
            "message": _string("Why the rule gave this result."),
            "properties": {"description": "More about the result, as name-value pairs.", "type": "object",
                           "additionalProperties": {"type": "string"}},
        },
    }


def _summary() -> Obj:
    counts = {
        "pass": "Results whose rule held.",
        "fail": "Results whose rule did not hold.",
        "warn": "Results whose rule did not hold and only warns.",
        "error": "Results whose rule could not be evaluated.",
        "skip": "Results whose rule was not evaluated.",
    }
    return {"description": "How many results the report holds, by result.", "type": "object",
            "properties": {name: {"description": text, "type": "integer"} for name, text in counts.items()}}


def _schema(kind: str) -> Obj:
    return {
        "description": f"{kind} holds the results of policies on objects, and their counts.",
        "type": "object",
        "properties": {
            "apiVersion": _string(f"Always {API_VERSION}."),
            "kind": _string(f"Always {kind}."),
            "metadata": {"type": "object"},
            "scope": _object_reference("The object the report is about, when it is about one."),
            "scopeSelector": _label_selector("The objects the report is about, by their labels."),
            "summary": _summary(),
            "results": {"description": "One entry per rule and object.", "type": "array", "items": _result()},
        },
    }


def _columns() -> list[Obj]:
    """``kubectl get`` columns: the scope (wide output) and the counts per result."""
    columns: list[Obj] = [
        {"name": "Kind", "type": "string", "jsonPath": ".scope.kind", "priority": 1},
        {"name": "Name", "type": "string", "jsonPath": ".scope.name", "priority": 1},
    ]
    columns += [{"name": result.capitalize(), "type": "integer", "jsonPath": f".summary.{result}"}
                for result in RESULTS]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return columns


def _crd(kind: str, plural: str, short_name: str, scope: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": [short_name]},
            "scope": scope,
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "additionalPrinterColumns": _columns(),
                "schema": {"openAPIV3Schema": _schema(kind)},
            }],
        },
    }


def report_crds() -> list[Obj]:
    """The PolicyReport (namespaced) and ClusterPolicyReport CRDs."""
    return [_crd("PolicyReport", "policyreports", "polr", "Namespaced"),
            _crd("ClusterPolicyReport", "clusterpolicyreports", "cpolr", "Cluster")]
