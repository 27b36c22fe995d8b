"""Write the desired webhook configurations with server-side apply; label excluded namespaces."""

from __future__ import annotations

import logging

import orjson
from kubernetes_asyncio.client import ApiClient

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.registration.builder import IGNORE_LABEL, Registration, desired

log = logging.getLogger("kinitiras_py.registration")
_PATHS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
          "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
FIELD_MANAGER = "kinitiras-py"


async def _apply(api: ApiClient, path: str, body: Obj) -> None:
    await api.call_api(
        path, "PATCH", query_params=[("fieldManager", FIELD_MANAGER), ("force", "true")],
        header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        body=orjson.loads(orjson.dumps(body)), auth_settings=["BearerToken"], _preload_content=False,
        _return_http_data_only=True,
    )


async def register(api: ApiClient, reg: Registration, ca_bundle: bytes, rules: list[Obj] | None = None) -> None:
    """Apply both configurations (creating them when missing) and mark excluded namespaces."""
    for namespace in reg.excluded_namespaces:
        await _apply(api, f"/api/v1/namespaces/{namespace}",
                     {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": namespace, "labels": {IGNORE_LABEL: "true"}}})
    for config in desired(reg, ca_bundle, rules):
        name = config["metadata"]["name"]
        await _apply(api, f"/apis/admissionregistration.k8s.io/v1/{_PATHS[config['kind']]}/{name}", config)
        log.info("webhook configuration applied", extra={"kind": config["kind"], "name": name})


async def unregister(api: ApiClient, reg: Registration) -> None:
    """Delete both configurations (used by tests and `dev down`); missing ones are fine."""
    for kind, name in (("MutatingWebhookConfiguration", reg.mutating_name),
                       ("ValidatingWebhookConfiguration", reg.validating_name)):
        try:
            await api.call_api(f"/apis/admissionregistration.k8s.io/v1/{_PATHS[kind]}/{name}", "DELETE",
                               auth_settings=["BearerToken"], _preload_content=False)
        except Exception as e:  # noqa: BLE001 — 404 and friends: nothing to remove
            log.info("webhook configuration not deleted", extra={"name": name, "reason": str(e)})
