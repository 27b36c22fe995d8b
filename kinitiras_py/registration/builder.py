"""Settings + CA bundle + rules → the desired Mutating/ValidatingWebhookConfiguration. Pure."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from kinitiras_py.api.policies import GROUP, KINDS, VERSION
from kinitiras_py.base.typedefs import Obj

IGNORE_LABEL = "kinitiras.kcloudlabs.io/ignore"
"""Namespaces carrying this label are never sent to the webhook (kube-system and our own get it)."""
NAME_LABEL = "kubernetes.io/metadata.name"
ALL_RESOURCES_RULE: Obj = {"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "*"}


@dataclass(frozen=True)
class Registration:
    """How the API server reaches us and what it sends."""

    mutating_name: str = "kinitiras-py"
    validating_name: str = "kinitiras-py"
    url: str | None = None
    """Base URL such as https://127.0.0.1:8443 (local development); else the Service is used."""
    service_name: str = "kinitiras-webhook"
    service_namespace: str = "kinitiras-system"
    service_port: int = 443
    failure_policy: str = "Fail"
    timeout_seconds: int = 3
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    object_selector: Obj | None = None
    """Opt-in mode: only objects matching this selector reach the webhook (kinitiras' label gate)."""
    side_effects: str = "None"
    operations: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE")
    extra: dict[str, str] = field(default_factory=dict)


def policy_rule() -> Obj:
    """The rule that sends our own policy kinds (always registered, with failurePolicy Fail)."""
    return {"apiGroups": [GROUP], "apiVersions": [VERSION], "resources": sorted(k.plural for k in KINDS.values()),
            "operations": ["CREATE", "UPDATE"], "scope": "*"}


def _client_config(reg: Registration, path: str, ca_bundle: bytes) -> Obj:
    config: Obj = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if reg.url:
        config["url"] = reg.url.rstrip("/") + path
    else:
        config["service"] = {"name": reg.service_name, "namespace": reg.service_namespace, "path": path,
                             "port": reg.service_port}
    return config


def _namespace_selector(reg: Registration) -> Obj:
    # The name label exists from Kubernetes 1.21; the ignore label works everywhere.
    return {"matchExpressions": [
        {"key": IGNORE_LABEL, "operator": "DoesNotExist"},
        {"key": NAME_LABEL, "operator": "NotIn", "values": sorted(reg.excluded_namespaces)},
    ]}


def _webhooks(reg: Registration, kind: str, path: str, ca_bundle: bytes, rules: list[Obj]) -> list[Obj]:
    base: Obj = {"admissionReviewVersions": ["v1", "v1beta1"], "sideEffects": reg.side_effects,
                 "timeoutSeconds": reg.timeout_seconds, "clientConfig": _client_config(reg, path, ca_bundle),
                 "matchPolicy": "Equivalent"}
    if kind == "mutating":
        # Templates are idempotent, so running again after later mutations is safe.
        base["reinvocationPolicy"] = "IfNeeded"
    prefix = "mutate" if kind == "mutating" else "validate"
    hooks = [{**base, "name": f"{prefix}-policies.kinitiras.kcloudlabs.io", "rules": [policy_rule()],
              "failurePolicy": "Fail"}]
    if rules:
        objects: Obj = {**base, "name": f"{prefix}.kinitiras.kcloudlabs.io",
                        "rules": [{**r, "operations": list(reg.operations)} for r in rules],
                        "failurePolicy": reg.failure_policy, "namespaceSelector": _namespace_selector(reg)}
        if reg.object_selector is not None:
            objects["objectSelector"] = reg.object_selector
        hooks.append(objects)
    return hooks


def desired(reg: Registration, ca_bundle: bytes, rules: list[Obj] | None = None) -> tuple[Obj, Obj]:
    """The (mutating, validating) configurations for ``rules`` (default: every resource)."""
    rules = [ALL_RESOURCES_RULE] if rules is None else rules
    labels = {"app.kubernetes.io/managed-by": "kinitiras-py"}
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": reg.mutating_name, "labels": labels},
                "webhooks": _webhooks(reg, "mutating", "/mutate", ca_bundle, rules)}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": reg.validating_name, "labels": labels},
                  "webhooks": _webhooks(reg, "validating", "/validate", ca_bundle, rules)}
    return mutating, validating
