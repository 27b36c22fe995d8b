"""Plaintext operations fanned out by a select: #n placeholders, key parts, value templates read
as YAML, and the errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.base.errors import PolicyError
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kubemod import fanout
from tests.compiling import render_select


def _containers() -> list[dict[str, Any]]:
    ports = [[100, 200], [100, 80], [100, 200], [80, 200, 300]]
    return [{"name": f"c{i + 1}", "image": "nginx:1" if i != 1 else "their-repo/app:2",
             "ports": [{"containerPort": p} for p in ps]} for i, ps in enumerate(ports)]


DEPLOYMENT = {"kind": "Deployment", "metadata": {"name": "web", "labels": {"team": "a", "x/y~z": "b"}},
              "spec": {"template": {"spec": {"containers": _containers()}}}}


def run(op: dict[str, Any], obj: dict[str, Any] = DEPLOYMENT) -> list[dict[str, Any]]:
    made = render_select(op, "spec.overrideRules[0].overriders.plaintext[0]")
    program = cel.compile_program(made.source)
    result = program.evaluate({"object": obj, "request": {"namespace": "shop"}})
    return fanout.operations(result, op, made.depth)


def test_placeholders_are_the_indexes_of_each_fanout_segment() -> None:
    op = {"op": "add", "select": "$.spec.template.spec.containers[*].ports[? @.containerPort == 80]",
          "path": "/spec/template/spec/containers/#0/ports/#1/containerPort", "valueTemplate": "8080"}
    assert run(op) == [
        {"op": "add", "path": "/spec/template/spec/containers/1/ports/1/containerPort", "value": 8080},
        {"op": "add", "path": "/spec/template/spec/containers/3/ports/0/containerPort", "value": 8080},
    ]


def test_a_constant_value_is_used_as_written() -> None:
    op = {"op": "replace", "select": "$.spec.template.spec.containers[? @.name == 'c3']",
          "path": "/spec/template/spec/containers/#0/name", "value": "renamed", "lenient": True}
    assert run(op) == [{"op": "replace", "path": "/spec/template/spec/containers/2/name", "value": "renamed",
                        "lenient": True}]


def test_map_keys_are_escaped_pointer_tokens_in_sorted_order() -> None:
    op = {"op": "remove", "select": "$.metadata.labels.*", "path": "/metadata/labels/#0"}
    assert run(op) == [{"op": "remove", "path": "/metadata/labels/team"},
                       {"op": "remove", "path": "/metadata/labels/x~1y~0z"}]


def test_unions_give_their_keys() -> None:
    op = {"op": "add", "select": "$.spec.template.spec.containers[0, 3, 9]", "path": "/x/#0", "value": 1}
    assert [o["path"] for o in run(op)] == ["/x/0", "/x/3"]


def test_selected_item_and_key_parts_in_the_template() -> None:
    op = {"op": "replace", "select": '$.spec.template.spec.containers[? @.image =~ "their-repo/.+"].image',
          "path": "/spec/template/spec/containers/#0/image",
          "valueTemplate": "{{ regexReplaceAll('(.+)/(.*)', selectedItem, 'my-repo/${2}') }}"}
    assert run(op) == [{"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "my-repo/app:2"}]
    op = {"op": "add", "select": "$.spec.template.spec.containers[*]", "path": "/metadata/annotations/c#0",
          "valueTemplate": '"{{ selectKeyParts[0] }}:{{ selectedItem.name }}"'}
    assert [o["value"] for o in run(op)] == ["0:c1", "1:c2", "2:c3", "3:c4"]
    op = {"op": "add", "path": "/metadata/annotations/where",
          "valueTemplate": "{{ namespace }}/{{ target.metadata.name }}"}
    assert run(op)[0]["value"] == "shop/web"


def test_a_rendered_value_is_read_as_yaml() -> None:
    def value(template: str) -> Any:
        return run({"op": "add", "path": "/v", "valueTemplate": template})[0]["value"]

    assert value("8080") == 8080
    assert value('"8080"') == "8080"
    assert value("false") is False
    assert value("name: {{ target.metadata.name }}\nports: [1, 2]") == {"name": "web", "ports": [1, 2]}
    assert value("{{ target.spec.template.spec.containers[0].ports }}") == [{"containerPort": 100},
                                                                           {"containerPort": 200}]
    assert value("") is None


def test_a_plain_select_gives_one_operation_or_none() -> None:
    op = {"op": "remove", "select": "$.metadata.ownerReferences[0]", "path": "/metadata/ownerReferences/0"}
    assert run(op) == []
    owned = {**DEPLOYMENT, "metadata": {"ownerReferences": [{"name": "o"}]}}
    assert run(op, owned) == [{"op": "remove", "path": "/metadata/ownerReferences/0"}]


def test_without_select_placeholders_stay() -> None:
    assert run({"op": "add", "path": "/a/#0", "valueTemplate": "1"}) == [{"op": "add", "path": "/a/#0", "value": 1}]


@pytest.mark.parametrize(("op", "field", "reason"), [
    ({"op": "add", "select": "$.a[*]", "path": "/a/#1", "value": 1}, ".path", "#1 names a key part"),
    ({"op": "add", "select": "$.a", "path": "/a/#0", "value": 1}, ".path", "has no [*]"),
    ({"op": "add", "select": "$..a", "path": "/a", "value": 1}, ".select", "recursive descent"),
    ({"op": "add", "select": "$.a == 1", "path": "/a", "value": 1}, ".select", "must be a path from $"),
    ({"op": "add", "select": "$.a[", "path": "/a", "value": 1}, ".select", "invalid select"),
    ({"op": "add", "path": "/a", "valueTemplate": "{{ x"}, ".valueTemplate", "never closed"),
    ({"op": "add", "path": "/a", "valueTemplate": "{{ }}"}, ".valueTemplate", "empty"),
])
def test_errors_name_the_field(op: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(PolicyError) as caught:
        render_select(op, "p")
    assert caught.value.path == "p" + field
    assert reason in caught.value.reason


def test_namespace_inside_a_string_is_text() -> None:
    assert fanout.template_cel("{{ 'namespace' + namespace }}", "p") == \
        "template.text(dyn('namespace' + kmNamespace))"
