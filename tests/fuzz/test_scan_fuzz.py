"""Fuzz the background scan: which rules it skips, and what it makes of any object.

Invariants:

* a rule built from random reads is skipped exactly when one of them reads request-only data
  (``request.operation``, ``request.userInfo``, ``request.dryRun``, ``oldObject``), and the reason
  names a read it does make;
* any object (random metadata, labels, spec) gets one result per rule that selects it, each one
  of pass/fail/warn/error/skip, never an exception, and the object is not changed.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.admission.results import RESULTS
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.scan.evaluation import Context, evaluator
from kinitiras_py.scan.plans import plan
from tests.compiling import compile_all

GROUP = "policy.kcloudlabs.io/v1alpha1"
READS = {
    "object.metadata.name != ''": None,
    "request.namespace != 'x'": None,
    "has(object.metadata.labels)": None,
    "size(object.metadata.?labels.orValue({})) < 100": None,
    "request.operation != 'DELETE'": "request.operation",
    "request.userInfo.username != 'bob'": "request.userInfo",
    "has(request.userInfo.groups)": "request.userInfo",
    "!request.dryRun": "request.dryRun",
    "oldObject == null": "oldObject",
    "has(oldObject.metadata)": "oldObject",
}


def validate(rules: list[str]) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "ClusterValidatePolicy", "metadata": {"name": "fuzz"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "validateRules": [{"cel": cel, "validationActions": ["Audit"]} for cel in rules]}}


@given(st.lists(st.lists(st.sampled_from(sorted(READS)), min_size=1, max_size=4), min_size=1, max_size=4),
       st.sampled_from([" && ", " || "]))
def test_a_rule_is_skipped_exactly_when_it_reads_request_only_data(rules: list[list[str]], join: str) -> None:
    found = plan(compile_all([validate([join.join(f"({atom})" for atom in atoms) for atoms in rules])])[0])
    for index, atoms in enumerate(rules):
        request_only = {READS[atom] for atom in atoms} - {None}
        reason = found.skipped.get(index)
        assert (reason is not None) == bool(request_only), (atoms, reason)
        if reason is not None:
            assert any(str(read) in reason for read in request_only), (atoms, reason)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False),
                    st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=12)
POLICIES = compile_all([
    validate(["has(object.metadata.labels) && 'owner' in object.metadata.labels",
              "object.spec.containers.all(c, c.name != '')",
              "request.userInfo.username != 'bob'",
              "size(object.metadata.name) < 64"]),
    {"apiVersion": GROUP, "kind": "ClusterOverridePolicy", "metadata": {"name": "label"},
     "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "overrideRules": [
         {"overriders": {"plaintext": [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]}}]}},
])
EVALUATOR = evaluator({p.identity: plan(p) for p in POLICIES}, Context(StaticStore()))


@given(st.fixed_dictionaries({"name": st.text(max_size=70), "namespace": st.sampled_from(["", "team"])},
                             optional={"labels": VALUES, "uid": SCALARS}),
       st.one_of(VALUES, st.fixed_dictionaries({"containers": VALUES})))
def test_any_object_gets_one_known_result_per_rule(meta: dict[str, Any], spec: Any) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    before = copy.deepcopy(obj)
    results = asyncio.run(EVALUATOR.results(obj))
    assert obj == before
    assert [(r.policy.name, r.rule) for r in results] == [("label", 0), ("fuzz", 0), ("fuzz", 1), ("fuzz", 2),
                                                          ("fuzz", 3)]
    assert all(r.result in RESULTS for r in results)
    assert results[3].result == "skip"
    assert results[0].result in ("pass", "error")
