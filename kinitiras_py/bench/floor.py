"""The floor: the least a mutating webhook on our stack can do, to compare ours against.

It runs on the same stack as ours (aiohttp, orjson, the same TLS listener): it decodes the
AdmissionReview, adds one label to the object and encodes the answer with that JSON patch. No
policies, no selection, no logging. Whatever ours costs beyond this is the price of policies.
"""

from __future__ import annotations

import base64

import orjson
from aiohttp import web

LABEL = "floor.example.com/seen"
_ESCAPED = LABEL.replace("~", "~0").replace("/", "~1")


def answer(body: bytes) -> bytes:
    """The AdmissionReview response to ``body``: allowed, with a patch adding :data:`LABEL`."""
    review = orjson.loads(body)
    request = review["request"]
    labels = ((request.get("object") or {}).get("metadata") or {}).get("labels")
    op = ({"op": "add", "path": f"/metadata/labels/{_ESCAPED}", "value": "yes"} if labels
          else {"op": "add", "path": "/metadata/labels", "value": {LABEL: "yes"}})
    return orjson.dumps({
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
        "response": {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch",
                     "patch": base64.b64encode(orjson.dumps([op])).decode()},
    })


async def _mutate(request: web.Request) -> web.Response:
    return web.Response(body=answer(await request.read()), content_type="application/json")


def make_app() -> web.Application:
    """The floor webhook: ``POST /mutate`` answers as :func:`answer` says."""
    app = web.Application()
    app.router.add_post("/mutate", _mutate)
    return app
