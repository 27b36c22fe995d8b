"""Read and write the webhook configurations: server-side apply of the desired ones, targeted
caBundle patches, and (``register``) labelling the excluded namespaces."""

from __future__ import annotations

import logging
from typing import Any

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, is_status
from kinitiras_py.registration.builder import IGNORE_LABEL, Registration, desired

log = logging.getLogger("kinitiras_py.registration")
_PATHS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
          "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
FIELD_MANAGER = "kinitiras-py"
_APPLY = "application/apply-patch+yaml"
_JSON_PATCH = "application/json-patch+json"
TIMEOUT = 10.0
"""Seconds for one request to the API server."""


def config_path(kind: str, name: str) -> str:
    """The API path of a webhook configuration."""
    return f"/apis/admissionregistration.k8s.io/v1/{_PATHS[kind]}/{name}"


async def _apply(client: Any, path: str, body: Obj) -> None:
    await Api.of(client).request("PATCH", path, query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                                 body=body, content_type=_APPLY, timeout=TIMEOUT)


async def read_config(client: Any, kind: str, name: str) -> Obj | None:
    """A webhook configuration as the cluster holds it; None when there is none."""
    try:
        return await Api.of(client).request("GET", config_path(kind, name), timeout=TIMEOUT)
    except Exception as e:
        if is_status(e, 404):
            return None
        raise


async def apply_config(client: Any, config: Obj) -> Obj:
    """Server-side apply one configuration (created when missing); returns the object written."""
    path = config_path(config["kind"], config["metadata"]["name"])
    return await Api.of(client).request("PATCH", path, query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                                        body=config, content_type=_APPLY, timeout=TIMEOUT)


async def patch_ca_bundle(client: Any, current: Obj, ca_bundle_b64: str) -> Obj | None:
    """Set ``clientConfig.caBundle`` of every webhook of ``current`` (as read) that differs.

    A JSON patch that first tests each entry's name and the object's resourceVersion, so it
    fails (HTTP 409/422) rather than hit the wrong entry when the object changed since it was
    read. Returns the patched object, or None when nothing differed.
    """
    ops: list[Obj] = []
    for i, hook in enumerate(current.get("webhooks") or []):
        if (hook.get("clientConfig") or {}).get("caBundle") != ca_bundle_b64:
            ops += [{"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")},
                    {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca_bundle_b64}]
    if not ops:
        return None
    meta = current.get("metadata") or {}
    ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")})
    return await Api.of(client).request("PATCH", config_path(current["kind"], meta["name"]),
                                        query=[("fieldManager", FIELD_MANAGER)], body=ops,  # type: ignore[arg-type]
                                        content_type=_JSON_PATCH, timeout=TIMEOUT)


async def label_ignored(client: Any, namespace: str) -> None:
    """Give ``namespace`` the ignore label, so the webhooks never see its objects."""
    await _apply(client, f"/api/v1/namespaces/{namespace}",
                 {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": namespace, "labels": {IGNORE_LABEL: "true"}}})


async def register(client: Any, reg: Registration, ca_bundle: bytes, rules: list[Obj] | None = None) -> None:
    """Apply both configurations (creating them when missing) and mark excluded namespaces."""
    for namespace in reg.excluded_namespaces:
        await label_ignored(client, namespace)
    for config in desired(reg, ca_bundle, rules):
        name = config["metadata"]["name"]
        await _apply(client, config_path(config["kind"], name), config)
        log.info("webhook configuration applied", extra={"kind": config["kind"], "config": name})
