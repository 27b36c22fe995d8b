"""The memory of mutations keyed without managedFields where no matched rule reads them (issue 25)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from kinitiras_py.admission import managedfields
from kinitiras_py.engine.evaluation import celreads
from kinitiras_py.engine.policies.compiled import OverrideMatch
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.webhook import codec

LABEL = {"template": {"type": "labels", "operation": "add", "path": "app", "value": {"string": "web"}}}


def managed(second: int) -> list[dict[str, Any]]:
    return [{"manager": "kubectl", "operation": "Update", "time": f"2026-11-27T14:00:{second:02d}Z",
             "fieldsV1": {"f:metadata": {"f:labels": {}}}}]


def pod(second: int | None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web", "labels": {"tier": "x"}, **meta}
    if second is not None:
        metadata["managedFields"] = managed(second)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [{"name": "c"}]}}


def matches(*overriders: dict[str, Any]) -> list[OverrideMatch]:
    policy = compile_policy({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
                             "metadata": {"name": "p"},
                             "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                                      "overrideRules": [{"overriders": o} for o in overriders]}})
    return [(policy, rule) for rule in policy.rules]


def key(obj: dict[str, Any], found: list[OverrideMatch]) -> bytes | None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "operation": "CREATE", "namespace": "", "object": obj}}
    request = codec.decode(orjson.dumps(review)).request
    return managedfields.key(request.fingerprint, request.object, found)


def test_the_key_is_the_object_without_its_managed_fields_and_their_length() -> None:
    found = matches(LABEL)
    first, again = key(pod(1), found), key(pod(2), found)
    assert first is not None and first == again
    without = pod(None)
    member = b'"managedFields":' + orjson.dumps(managed(1))
    assert first.split(b"\0")[1] == orjson.dumps(without)
    assert first.endswith(b"\0%d" % len(member))
    assert key(pod(1, uid="a"), found) != first  # anything else that differs keeps it apart
    # Where the member sits in the metadata (first, between, last) the JSON is the object's without it.
    for order in (("managedFields", "name", "labels"), ("name", "managedFields", "labels"),
                  ("name", "labels", "managedFields")):
        obj = pod(1)
        obj["metadata"] = {name: obj["metadata"][name] for name in order}
        cut = key(obj, found)
        assert cut is not None
        expected = copy.deepcopy(obj)
        del expected["metadata"]["managedFields"]
        assert cut.split(b"\0")[1] == orjson.dumps(expected)


def test_no_such_key_where_it_could_mislead() -> None:
    found = matches(LABEL)
    assert key(pod(None), found) is None  # nothing to leave out
    longer = pod(1)
    longer["metadata"]["managedFields"][0]["manager"] = "kube-controller-manager"
    assert key(longer, found) != key(pod(1), found)  # another length: another size to bound
    twice = pod(1)
    twice["spec"]["copy"] = {"managedFields": managed(1)}  # the same member elsewhere: not cut
    assert key(twice, found) is None
    assert managedfields.key(None, pod(1), found) is None


@pytest.mark.parametrize(("overriders", "unread"), [
    (LABEL, True),
    ({"cel": '[{"op": "add", "path": "/metadata/labels/a", "value": object.metadata.name}]'}, True),
    ({"cel": '[{"op": "add", "path": "/metadata/labels/a", "value": object.metadata.managedFields[0].time}]'},
     False),
    ({"cel": '[{"op": "add", "path": "/metadata/labels/a", "value": string(size(object.metadata))}]'}, False),
    ({"cel": '[{"op": "add", "path": "/metadata/labels/a", "value": string(object.metadata)}]'}, False),
    ({"cel": '[{"op": "add", "path": "/metadata/labels/a", "value": string(object)}]'}, False),
    ({"cel": '[{"op": "add", "path": "/metadata/labels/a", "value": object.metadata.all(k, k != "x") ? "y" : "n"}]'},
     False),
    ({"plaintext": [{"op": "add", "path": "/metadata/labels/a", "value": "b"}]}, False),
])
def test_a_rule_is_blind_to_them_only_when_its_programs_neither_read_nor_measure_them(
        overriders: dict[str, Any], unread: bool) -> None:
    [(_, rule)] = matches(overriders)
    assert managedfields.unread(rule) is unread
    assert (key(pod(1), [(matches(overriders)[0][0], rule)]) is not None) is unread


@pytest.mark.parametrize(("read", "path", "reaches"), [
    ((((), "kind"),), ("metadata", "managedFields"), False),
    ((((), "all"),), ("metadata", "managedFields"), True),
    (((("metadata",), "kind"),), ("metadata", "managedFields"), False),
    (((("metadata",), "size"),), ("metadata", "managedFields"), True),
    (((("metadata", "labels"), "all"),), ("metadata", "managedFields"), False),
    (((("*", "managedFields"), "kind"),), ("metadata", "managedFields"), True),
    (((("metadata", "managedFields", "*", "time"), "all"),), ("metadata", "managedFields"), True),
])
def test_reaches(read: tuple[celreads.Read, ...], path: celreads.Path, reaches: bool) -> None:
    assert celreads.reaches((("object", read),), "object", path) is reaches
    assert celreads.reaches((("oldObject", read),), "object", path) is False
    assert celreads.reaches(None, "object", path) is True


@pytest.mark.parametrize(("paths", "reached"), [
    ([("metadata", "labels", "a")], False),
    ([("spec", "containers", "0")], False),
    ([("metadata", "labels", "a"), ("metadata",)], True),
    ([()], True),
    ([("metadata", "managedFields")], True),
    ([("metadata", "managedFields", "0", "time")], True),
])
def test_reached(paths: list[tuple[str, ...]], reached: bool) -> None:
    assert managedfields.reached(paths) is reached
