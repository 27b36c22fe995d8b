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
from fractions import Fraction

import orjson
from aiohttp import web

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import workload

CPU_FACTOR, MEMORY_FACTOR = Fraction("0.5"), Fraction("0.25")
_QUANTITY = re.compile(r"([0-9]*\.?[0-9]*)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)")
_DECIMAL = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0), ("m", -3), ("u", -6), ("n", -9))
_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_POWERS = {**{name: Fraction(10) ** power for name, power in _DECIMAL},
           **{name: Fraction(2**bits) for name, bits in _BINARY}}


def _scaled(text: str, factor: Fraction, step: Fraction | int) -> str:
    """``text`` times ``factor``, rounded down to a multiple of ``step``, in canonical form."""
    number, suffix = _QUANTITY.fullmatch(text).groups()  # type: ignore[union-attr]
    value = Fraction(Fraction(number) * _POWERS[suffix] * factor // step) * step
    if value == 0:
        return "0"
    if suffix.endswith("i") and value.denominator == 1 and abs(value) >= 1024:
        whole = int(value)
        return next((f"{whole >> bits}{name}" for name, bits in _BINARY if whole % (1 << bits) == 0), str(whole))
    return next(f"{value / Fraction(10) ** power}{name}" for name, power in _DECIMAL
                if (value / Fraction(10) ** power).denominator == 1)


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
            wanted = {name: _scaled(limits[name], factor, step)
                      for name, factor, step in (("cpu", CPU_FACTOR, Fraction(1, 1000)), ("memory", MEMORY_FACTOR, 1))
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
