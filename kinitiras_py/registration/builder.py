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


def desired(reg: Registration, ca_bundle: bytes, rules: list[Obj] | None = None,
            validate_rules: list[Obj] | None = None) -> tuple[Obj, Obj]:
    """The (mutating, validating) configurations: ``rules`` (default: every resource) send
    objects to /mutate, ``validate_rules`` (default: ``rules``) to /validate. The policy kinds
    reach both in any case."""
    rules = [ALL_RESOURCES_RULE] if rules is None else rules
    validate_rules = rules if validate_rules is None else validate_rules
    labels = {"app.kubernetes.io/managed-by": "kinitiras-py"}
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": reg.mutating_name, "labels": labels},
                "webhooks": _webhooks(reg, "mutating", "/mutate", ca_bundle, rules)}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": reg.validating_name, "labels": labels},
                  "webhooks": _webhooks(reg, "validating", "/validate", ca_bundle, validate_rules)}
    return mutating, validating


# --- comparing with what the cluster holds ---------------------------------------------------

OWNED_FIELDS = ("rules", "clientConfig", "failurePolicy", "namespaceSelector", "objectSelector", "timeoutSeconds",
                "sideEffects", "reinvocationPolicy", "admissionReviewVersions", "matchPolicy")
"""The fields of each webhook entry we manage; anything else on the object is left alone."""


def _owned_rule(rule: Obj) -> Obj:
    return {"apiGroups": rule.get("apiGroups") or [], "apiVersions": rule.get("apiVersions") or [],
            "resources": rule.get("resources") or [], "operations": rule.get("operations") or [],
            "scope": rule.get("scope") or "*"}


def _owned_client(config: Obj) -> Obj:
    service = config.get("service")
    owned: Obj = {"caBundle": config.get("caBundle") or "", "url": config.get("url")}
    if isinstance(service, dict):
        owned["service"] = {"name": service.get("name"), "namespace": service.get("namespace"),
                            "path": service.get("path"), "port": service.get("port") or 443}
    return owned


def owned_fields(config: Obj) -> dict[str, Obj]:
    """The fields we manage of each webhook of a configuration, by webhook name, with the API
    server's defaults filled in so a configuration read back compares equal to the one sent."""
    mutating = config.get("kind") == "MutatingWebhookConfiguration"
    hooks: dict[str, Obj] = {}
    for hook in config.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hooks[str(hook.get("name"))] = {
            "rules": [_owned_rule(r) for r in hook.get("rules") or [] if isinstance(r, dict)],
            "clientConfig": _owned_client(hook.get("clientConfig") or {}),
            "failurePolicy": hook.get("failurePolicy") or "Fail",
            "namespaceSelector": hook.get("namespaceSelector") or {},
            "objectSelector": hook.get("objectSelector") or {},
            "timeoutSeconds": hook.get("timeoutSeconds") or 10,
            "sideEffects": hook.get("sideEffects"),
            "reinvocationPolicy": (hook.get("reinvocationPolicy") or "Never") if mutating else None,
            "admissionReviewVersions": hook.get("admissionReviewVersions") or [],
            "matchPolicy": hook.get("matchPolicy") or "Equivalent",
        }
    return hooks


def differences(current: Obj | None, wanted: Obj) -> list[str]:
    """What must change for ``current`` (as read from the cluster, None when missing) to be
    ``wanted``: ``webhook/field`` items, ``+webhook``/``-webhook`` for entries to add or
    remove; empty when nothing we own differs."""
    if current is None:
        return ["(missing)"]
    have, want = owned_fields(current), owned_fields(wanted)
    changes = [f"+{name}" for name in want if name not in have] + [f"-{name}" for name in have if name not in want]
    for name in want:
        if name in have:
            changes += [f"{name}/{key}" for key in OWNED_FIELDS if have[name][key] != want[name][key]]
    return changes
