"""The record of conversions decides which conversions a change keeps, and fails closed (issue 21)."""

from __future__ import annotations

import copy
from typing import Any

from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.evaluation.conversionrecord import ConversionRecord
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding

ZONE = cel.compile_program('object.spec.selector[?("zone-" + object.metadata.name)].orValue("none")')
LABELS = cel.compile_program('object.metadata.labels[?"app"].orValue("-")')
WIDGET: dict[str, Any] = {"metadata": {"name": "w1", "labels": {"app": "web"}}, "spec": {"selector": {}}}
ZONED: dict[str, Any] = {"metadata": {"name": "w1", "labels": {"app": "web"}}, "spec": {"selector": {"zone-w1": "eu"}}}
TO_ZONE = [("spec", "selector", "zone-w1")]


def test_the_record_holds_what_each_conversion_projected_and_what_each_rule_changed() -> None:
    record = ConversionRecord()
    bound = Bindings({"object": WIDGET}, record=record)
    assert (ZONE.evaluate(bound), LABELS.evaluate(bound)) == ("none", "web")
    assert [reads for reads, _ in record.projections] == [ZONE.reads, LABELS.reads]
    # An empty map read through a computed key depends on every key added to it.
    assert (("spec", "selector"), True) in record.projections[0][1]["object"]
    later = bound.changed("object", ZONED, TO_ZONE)
    assert record.changes == [("object", tuple(TO_ZONE))]
    assert record.kept_count == 1  # the labels' conversion, which the change cannot reach
    assert later.activation(LABELS.reads) is bound.activation(LABELS.reads)
    assert later.activation(ZONE.reads) is not bound.activation(ZONE.reads)
    assert (ZONE.evaluate(later), LABELS.evaluate(later)) == ("eu", "web")  # never a stale copy
    assert not record.undescribed


def test_bindings_share_the_record_they_were_given_across_changes() -> None:
    record = ConversionRecord()
    bound = Bindings({"object": WIDGET}, record=record)
    LABELS.evaluate(bound)
    relabelled = copy.deepcopy(ZONED)
    relabelled["metadata"]["labels"]["app"] = "db"
    later = bound.changed("object", ZONED, TO_ZONE).changed("object", relabelled, [("metadata", "labels", "app")])
    assert LABELS.evaluate(later) == "db"
    assert [name for name, _ in record.changes] == ["object", "object"] and record.kept_count == 1


def test_while_an_input_is_undescribed_no_conversion_is_kept() -> None:
    undescribed = ["policy features 0x100"]  # shared with the request's read record
    record = ConversionRecord(undescribed)
    bound = Bindings({"object": WIDGET}, record=record)
    LABELS.evaluate(bound)
    later = bound.changed("object", ZONED, TO_ZONE)
    assert later.activation(LABELS.reads) is not bound.activation(LABELS.reads)
    assert record.kept_count == 0 and LABELS.evaluate(later) == "web"
    assert record.changes == [("object", tuple(TO_ZONE))]  # still recorded


def test_a_change_the_record_cannot_describe_keeps_nothing_and_is_noted() -> None:
    for name, paths in (("oldObject", TO_ZONE), ("object", [])):  # rules change the object, at paths
        record = ConversionRecord()
        bound = Bindings({"object": WIDGET, "oldObject": WIDGET}, record=record)
        LABELS.evaluate(bound)
        later = bound.changed(name, copy.deepcopy(ZONED), paths)
        assert later.activation(LABELS.reads) is not bound.activation(LABELS.reads)
        assert record.kept_count == 0 and record.undescribed == [f"a change of {name!r} at {len(paths)} paths"]


def test_a_conversion_the_record_did_not_make_is_not_kept() -> None:
    record = ConversionRecord()
    taken = {"object": ((("metadata", "labels"), True),)}
    made = record.projected(LABELS.reads, {}, taken)
    foreign = ConversionRecord().projected(LABELS.reads, {}, taken)
    assert record.kept("object", TO_ZONE, {"made": made, "foreign": foreign}) == {"made": made}
    assert record.kept("object", [("metadata", "labels", "app")], {"made": made}) == {}
    assert record.projections == [(LABELS.reads, taken)] and record.kept_count == 1


def test_a_program_that_may_read_anything_is_never_kept_across_a_change() -> None:
    record = ConversionRecord()
    bound = Bindings({"object": WIDGET}, record=record)
    everything = bound.activation(None)  # reads None: every variable, whole
    later = bound.changed("object", ZONED, [("metadata", "annotations", "x")])
    assert later.activation(None) is not everything and record.kept_count == 0


def test_every_rule_s_writes_are_noted_even_those_that_leave_the_object_as_it_was() -> None:
    policy = compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "overrideRules": [
            {"overriders": {"plaintext": [{"op": "replace", "path": "/metadata/labels/app", "value": "web"}]}},
            {"overriders": {"plaintext": [{"op": "add", "path": "/spec/selector/zone", "value": "eu"}]}},
            {"overriders": {"cel": '[{"op": "test", "path": "/metadata/name", "value": "w1"}, '
                                   '{"op": "copy", "from": "/metadata/labels/app", "path": "/spec/app"}]'}}]}})
    record = ConversionRecord()
    mutation = overriding.mutate([(policy, rule) for rule in policy.rules], WIDGET, {}, conversions=record)
    assert [a[1] for a in mutation.applied] == [1, 2]  # the first rule changed nothing
    # Where the operations wrote, and where a test and a copy read.
    assert record.reached == [("metadata", "labels", "app"), ("spec", "selector", "zone"), ("spec", "app"),
                              ("metadata", "name"), ("metadata", "labels", "app")]
