"""Fuzz: answers remembered by the request's bytes (:mod:`.admission.answers`) change no answer.

Random Pods and request fields under random subsets of the memory-of-mutations fuzz policies
(oversell, labels, plaintext, CEL reading the request and the Namespace, rules that fail), each
review laid out as the API server writes it, sent through the handlers' whole-body entry point:

* a request answered, then the same request with another uid, then with the memory off: the
  same bytes but for the uid;
* the first body with one byte changed, inserted or removed: the answer with the memory on is
  the answer with it off (a body the memory does not know, or one that is no longer a review,
  never gets a remembered answer).

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.admission.engine import Engine
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics
from tests.fuzz.test_mutationmemo_fuzz import FIELDS, NAMESPACES, POLICIES


def body(uid: str, request: dict[str, Any]) -> bytes:
    """The review as the API server writes it: kind first, the uid first in the request."""
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    req = {"uid": uid, "kind": kind, "resource": {"group": "", "version": "v1", "resource": "pods"},
           "requestKind": kind, **request}
    if req["operation"] == "CREATE":
        req["oldObject"] = None
    return orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": req})


def answer(handlers: Handlers, data: bytes, endpoint: str = "mutate") -> bytes:
    """The answer of ``endpoint`` to ``data``, its status code appended."""
    out, code = asyncio.run(handlers.answer(endpoint, data))
    return out + b"%d" % code


def unnamed(out: bytes, uid: str) -> bytes:
    return out.replace(f'"uid":"{uid}"'.encode(), b'"uid":"U"', 1)


@given(chosen=st.sets(st.sampled_from(range(len(POLICIES))), min_size=1), request=st.fixed_dictionaries(FIELDS),
       at=st.integers(min_value=0), edit=st.sampled_from(["change", "insert", "remove"]),
       byte=st.integers(min_value=0, max_value=255))
def test_a_remembered_answer_is_the_answer(chosen: set[int], request: dict[str, Any], at: int, edit: str,
                                           byte: int) -> None:
    engine = Engine([POLICIES[i] for i in sorted(chosen)], store=StaticStore(NAMESPACES))
    handlers = Handlers(engine, Metrics())
    first = body("u-1", request)
    at %= len(first)
    edited = {"change": first[:at] + bytes([byte]) + first[at + 1:], "insert": first[:at] + bytes([byte]) + first[at:],
              "remove": first[:at] + first[at + 1:]}[edit]
    remembered = [unnamed(answer(handlers, first), "u-1"), unnamed(answer(handlers, body("u-2", request)), "u-2")]
    edited_on = answer(handlers, edited)
    engine.answers.configure(0)
    fresh = unnamed(answer(handlers, body("u-3", request)), "u-3")
    assert remembered == [fresh, fresh]
    assert edited_on == answer(handlers, edited)
