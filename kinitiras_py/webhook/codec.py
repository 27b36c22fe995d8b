"""AdmissionReview (admission.k8s.io v1 and v1beta1) decoding and encoding.

The request is bad (not the object): :class:`~kinitiras_py.base.errors.ReviewError`, answered
with a 400 denial that echoes the uid when one could be read. Field types are checked in
:mod:`kinitiras_py.webhook.shape` before anything reads them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson

from kinitiras_py.admission.pipeline import Request, with_namespace
from kinitiras_py.base.errors import ReviewError
from kinitiras_py.base.typedefs import Obj, Patch
from kinitiras_py.webhook import peek, shape

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


@dataclass
class Review:
    """A decoded AdmissionReview request."""

    api_version: str
    uid: str
    request: Request
    raw: Obj
    """The ``request`` member as received (kind, resource, name, options...)."""

    @property
    def kind(self) -> Obj:
        """The GroupVersionKind of the object under review."""
        kind: Obj = self.raw.get("kind") or {}
        return kind


def peek_uid(body: bytes, complete: bool = True) -> tuple[str, str]:
    """Best-effort (apiVersion, uid) of a body that failed to decode, for the error response.

    The apiVersion is echoed only when it is one we answer in, the uid only when it is a string.
    A body orjson cannot decode (too deep, a lone surrogate, cut short) is scanned instead
    (:func:`peek.scan`). ``complete=False`` means ``body`` is only the beginning of the request
    (it was too large to read): the uid is then found only where the API server puts it.
    """
    doc: Any = None
    if complete:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
    if isinstance(doc, dict):
        req = doc.get("request")
        uid = req.get("uid") if isinstance(req, dict) else None
        echoed = doc.get("apiVersion")
    else:
        found = peek.scan(body, whole=complete) if doc is None else peek.Found("", "")
        echoed, uid = found.api_version, found.uid
    return echoed if echoed in API_VERSIONS else API_VERSIONS[0], uid if isinstance(uid, str) else ""


def decode(body: bytes) -> Review:
    """Parse an AdmissionReview request; ReviewError says precisely what is wrong."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise ReviewError(f"the request body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ReviewError("the request body is not a JSON object")
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind != "AdmissionReview" or api_version not in API_VERSIONS:
        raise ReviewError(f"expected an AdmissionReview of {' or '.join(API_VERSIONS)}, got {api_version}/{kind}")
    req = doc.get("request")
    if not isinstance(req, dict):
        raise ReviewError("the AdmissionReview has no request")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("the AdmissionReview request has no uid")
    operation = req.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ReviewError(f"unsupported operation {operation!r}: expected one of {', '.join(OPERATIONS)}")
    obj, old = req.get("object"), req.get("oldObject")
    if operation == "DELETE":
        # The object being deleted arrives as oldObject; rules see it as `object`.
        obj, old = old, None
    if operation != "CONNECT" and not isinstance(obj, dict):
        raise ReviewError(f"the {operation} request carries no object")
    if operation == "UPDATE" and not isinstance(old, dict):
        raise ReviewError("the UPDATE request carries no oldObject")
    written = shape.check_request(req)
    if operation == "DELETE":
        written = {"object": written["oldObject"]} if "oldObject" in written else {}
    sizes = {name: len(blob) for name, blob in written.items()}
    namespace = req.get("namespace") or ""
    if namespace:
        # Objects created by controllers (e.g. Pods from a ReplicaSet) can arrive without
        # metadata.namespace; selection and namespaced policies need it. Filling it in on the
        # received object too keeps it out of the response patch.
        received = {"object": obj, "oldObject": old}
        filled = {name: with_namespace(value, namespace) for name, value in received.items()}
        # A filled-in object's size stays an upper bound: at most `,"namespace":"..."` more.
        grown = len(orjson.dumps(namespace)) + len(',"namespace":')
        sizes = {name: size + (grown if filled[name] is not received[name] else 0) for name, size in sizes.items()}
        obj, old = filled["object"], filled["oldObject"]
    user_info = req.get("userInfo")
    user: Obj = user_info if isinstance(user_info, dict) else {}
    dry_run = req.get("dryRun") is True
    request = Request(operation=operation, object=obj if isinstance(obj, dict) else {},
                      old_object=old if isinstance(old, dict) else None,
                      namespace=namespace, user_info=user, dry_run=dry_run, size=len(body),
                      sizes=sizes, fingerprint=_fingerprint(operation, namespace, user, dry_run, obj, old, written))
    return Review(api_version=str(api_version), uid=uid, request=request, raw=req)


def _fingerprint(operation: str, namespace: str, user: Obj, dry_run: bool, obj: object, old: object,
                 written: dict[str, bytes]) -> bytes | None:
    """Everything of the request that rules and selection can see, as bytes that differ whenever
    it does (:attr:`Request.fingerprint`): the request's fields, then the objects as received
    (before the namespace is filled in: the namespace is in the fields). JSON holds no NUL byte,
    so the parts cannot run into one another. None when an object has no exact JSON."""
    try:
        parts = [orjson.dumps([operation, namespace, user, dry_run])]
    except orjson.JSONEncodeError:
        return None
    for name, value in (("object", obj), ("oldObject", old)):
        blob = b"" if value is None else written.get(name)
        if blob is None:
            return None
        parts.append(blob)
    return b"\0".join(parts)


def allowed(api_version: str, uid: str, patch: Patch | bytes | None = None, warnings: list[str] | None = None,
            audit: list[str] | None = None) -> bytes:
    """An allowing response; the patch (its operations, or their JSON) only when there is one."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(patch if isinstance(patch, bytes) else orjson.dumps(patch)).decode()
    if warnings:
        response["warnings"] = list(warnings)
    if audit:
        response["auditAnnotations"] = {f"kinitiras.kcloudlabs.io/audit-{i}": text for i, text in enumerate(audit)}
    return _review(api_version, response)


def denied(api_version: str, uid: str, message: str, code: int = 403, warnings: list[str] | None = None) -> bytes:
    """A denying response; the API server shows ``message`` to the user."""
    reason = {400: "BadRequest", 403: "Forbidden", 405: "MethodNotAllowed", 413: "RequestEntityTooLarge",
              500: "InternalError"}.get(code, "Forbidden")
    response: dict[str, Any] = {"uid": uid, "allowed": False,
                                "status": {"status": "Failure", "code": code, "reason": reason, "message": message}}
    if warnings:
        response["warnings"] = list(warnings)
    return _review(api_version, response)


def _review(api_version: str, response: Obj) -> bytes:
    return orjson.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})
