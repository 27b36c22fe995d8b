"""A hand-written webhook doing what the benchmark's matching policies do, to compare ours against.

What a platform team would write instead of policies: aiohttp and orjson, the mutation coded
directly from the policies' documented semantics (docs/templates.md), with no engine. For a Pod
labelled ``app: web`` it answers the final object of ``k`` matching policies
(:func:`..workload.matching_policy`), as one JSON patch:

* ``resourcesOversell`` (cpu factor 0.5, memory 0.25): every container and init container with a
  limit gets a request of that limit times the factor, cpu rounded down to a millicore and memory
  to a byte, written as Kubernetes' canonical quantity in the limit's own format (``2`` gives
  ``1``, ``4Gi`` gives ``1Gi``, ``4Gi`` at 0.2 ``858993459``);
* one label ``bench.example.com/policy-NNNN: applied`` per policy.

It parses the quantity forms the benchmark's Pods use (decimal and binary suffixes); like a
hand-written webhook, it is written for its own Pods only.
"""

from __future__ import annotations

import base64
import re

import orjson
from aiohttp import web

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import workload

CPU, MEMORY = (1, 2, 3), (1, 4, 0)
"""Factor (numerator, denominator) and the decimal digits the result is rounded down to."""
_QUANTITY = re.compile(r"([0-9]*)\.?([0-9]*)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIXES = {power: name for name, power in _DECIMAL.items()}
_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_BITS = dict(_BINARY)


def _scaled(text: str, numerator: int, denominator: int, digits: int) -> str:
    """``text`` times ``numerator / denominator``, rounded down to ``digits`` decimals, in canonical form."""
    whole, fraction, suffix = _QUANTITY.fullmatch(text).groups()  # type: ignore[union-attr]
    # In integers: the value is mantissa * 2**bits * 10**exponent; ``units`` counts 10**-digits.
    mantissa, bits = int(whole + fraction or "0"), _BITS.get(suffix, 0)
    exponent = _DECIMAL.get(suffix, 0) - len(fraction) + digits
    top, bottom = (mantissa << bits) * 10 ** max(exponent, 0), 10 ** max(-exponent, 0)
    units = top * numerator // (bottom * denominator)
    if units == 0:
        return "0"
    scale = 10**digits
    if bits and units % scale == 0 and units >= 1024 * scale:
        value = units // scale
        return next((f"{value >> b}{name}" for name, b in _BINARY if value % (1 << b) == 0), str(value))
    power = -digits
    while units % 1000 == 0 and power < 18:
        units, power = units // 1000, power + 3
    return f"{units}{_SUFFIXES[power]}"


def patch(pod: Obj, policies: int) -> list[Obj]:
    """The JSON patch turning ``pod`` into what ``policies`` matching policies make of it."""
    meta = pod.get("metadata") or {}
    if policies < 1 or (meta.get("labels") or {}).get("app") != "web":
        return []
    ops: list[Obj] = []
    spec = pod.get("spec") or {}
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or ()):
            resources = container.get("resources") or {}
            limits = resources.get("limits") or {}
            wanted = {name: _scaled(limits[name], *how) for name, how in (("cpu", CPU), ("memory", MEMORY))
                      if limits.get(name) is not None}
            path = f"/spec/{kind}/{i}/resources/requests"
            if "requests" not in resources:
                ops += [{"op": "add", "path": path, "value": wanted}] if wanted else []
            else:
                ops += [{"op": "add", "path": f"{path}/{name}", "value": v} for name, v in wanted.items()]
    ops += [{"op": "add", "path": "/metadata/labels/" + workload.policy_label(i).replace("/", "~1"), "value": "applied"}
            for i in range(policies)]
    return ops


def answer(body: bytes, policies: int) -> bytes:
    """The AdmissionReview response to ``body``: allowed, with :func:`patch` when it changes anything."""
    review = orjson.loads(body)
    request = review["request"]
    ops = patch(request.get("object") or {}, policies)
    response: Obj = {"uid": request["uid"], "allowed": True}
    if ops:
        response |= {"patchType": "JSONPatch", "patch": base64.b64encode(orjson.dumps(ops)).decode()}
    return orjson.dumps({"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
                         "response": response})


def make_app(policies: int) -> web.Application:
    """The hand-written webhook for ``policies`` matching policies: ``POST /mutate``."""

    async def mutate(request: web.Request) -> web.Response:
        return web.Response(body=answer(await request.read(), policies), content_type="application/json")

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    return app
