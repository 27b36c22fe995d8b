"""The record of what a request read: what the caches derive from it, and failing closed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kinitiras_py.admission import mutationmemo
from kinitiras_py.admission.readrecord import KNOWN_FEATURES, ReadRecord
from kinitiras_py.base.ids import RuleId
from kinitiras_py.engine.evaluation.cel import compile_program
from kinitiras_py.engine.matching import selection
from kinitiras_py.engine.policies.compiled import OverrideMatch
from kinitiras_py.engine.policies.compiling import compile_policy

POLICY = compile_policy(yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: p}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders: {template: {type: labels, operation: add, path: a, value: {string: b}}}
"""))
MATCHES: list[OverrideMatch] = [(POLICY, POLICY.rules[0])]
RULE = RuleId(POLICY.identity, 0)


def test_nothing_read_is_alone_and_keyed_as_the_memory_of_mutations_keys_it() -> None:
    record = ReadRecord(7, 0)
    assert record.alone and record.cacheable and not record.undescribed
    assert record.key(b"fp", MATCHES) == mutationmemo.key(b"fp", 7, MATCHES, 0, None, {}, {}, {})
    assert record.key(None, MATCHES) is None  # no fingerprint: nothing to look up by
    assert ReadRecord(8, 0).key(b"fp", MATCHES) != record.key(b"fp", MATCHES)


@pytest.mark.parametrize("read", [
    {"features": selection.NAMESPACE, "namespace": {"metadata": {"labels": {"env": "a"}}}},
    {"references": {RULE: {"team": "a"}}},
    {"policy_references": {POLICY.identity: {"cfg": {"data": {}}}}},
    {"configmaps": {RULE: compile_program("[]")}},
    {"failures": {RULE: "ConfigMap team-a/cfg not found"}},
    {"javascript": True, "features": selection.JAVASCRIPT},
], ids=["namespace", "reference", "policy reference", "configmap", "failed lookup", "javascript"])
def test_anything_read_makes_the_answer_depend_on_more_than_the_request(read: dict[str, Any]) -> None:
    record = ReadRecord(**{"generation": 1, "features": 0, **read})
    assert not record.alone
    if "failures" in read or "javascript" in read:
        assert record.key(b"fp", MATCHES) is None  # may differ next time: never remembered
    elif "policy_references" not in read:  # those are keyed as merged into each rule's references
        assert record.key(b"fp", MATCHES) not in (None, ReadRecord(1, 0).key(b"fp", MATCHES))
    assert record.cacheable and not record.undescribed


def test_what_the_record_cannot_describe_turns_caching_off() -> None:
    unknown = ReadRecord(1, KNOWN_FEATURES + 1)
    assert unknown.undescribed == [f"policy features {KNOWN_FEATURES + 1:#x}"]
    assert not unknown.alone and not unknown.cacheable and unknown.key(b"fp", MATCHES) is None
    inexact = ReadRecord(1, 0, references={RULE: {"n": 2**70}})  # no exact JSON for it
    assert inexact.key(b"fp", MATCHES) is None
    assert inexact.undescribed == ["a value without exact JSON"] and not inexact.cacheable


def test_the_conversions_are_the_records_own_part_and_share_what_it_cannot_describe() -> None:
    record = ReadRecord(1, 0)
    assert record.conversions.undescribed is record.undescribed
    projection = record.conversions.projected(None, {}, {})  # holds no variable: no change reaches it
    assert record.conversions.kept("object", [("spec", "selector", "zone-w1")], {0: projection}) == {0: projection}
    assert record.cacheable and record.key(b"fp", MATCHES) is not None
    assert record.conversions.kept("object", [], {0: projection}) == {}  # a change at no path: not described
    assert not record.cacheable and not record.alone and record.key(b"fp", MATCHES) is None
    unknown = ReadRecord(1, KNOWN_FEATURES + 1)  # nothing kept across a change while an input is undescribed
    held = {0: unknown.conversions.projected(None, {}, {})}
    assert unknown.conversions.kept("object", [("metadata",)], held) == {}
