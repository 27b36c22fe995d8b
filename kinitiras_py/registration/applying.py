"""Write the desired webhook configurations with server-side apply; label excluded namespaces."""

from __future__ import annotations

import logging
from typing import Any

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api
from kinitiras_py.registration.builder import IGNORE_LABEL, Registration, desired

log = logging.getLogger("kinitiras_py.registration")
_PATHS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
          "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
FIELD_MANAGER = "kinitiras-py"
_APPLY = "application/apply-patch+yaml"


def config_path(kind: str, name: str) -> str:
    """The API path of a webhook configuration."""
    return f"/apis/admissionregistration.k8s.io/v1/{_PATHS[kind]}/{name}"


async def _apply(client: Any, path: str, body: Obj) -> None:
    await Api.of(client).request("PATCH", path, query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                                 body=body, content_type=_APPLY)


async def register(client: Any, reg: Registration, ca_bundle: bytes, rules: list[Obj] | None = None) -> None:
    """Apply both configurations (creating them when missing) and mark excluded namespaces."""
    for namespace in reg.excluded_namespaces:
        await _apply(client, f"/api/v1/namespaces/{namespace}",
                     {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": namespace, "labels": {IGNORE_LABEL: "true"}}})
    for config in desired(reg, ca_bundle, rules):
        name = config["metadata"]["name"]
        await _apply(client, config_path(config["kind"], name), config)
        log.info("webhook configuration applied", extra={"kind": config["kind"], "config": name})
