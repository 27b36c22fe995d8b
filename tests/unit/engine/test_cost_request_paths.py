"""The request check of a cost bound measures what the program reads, not the longest list anywhere.

Regression: the resources templates are admitted for lists of at most 512 / 256 entries, and
every list in the request was measured, so a Pod with 300 env entries failed those rules (and
was denied under failurePolicy Fail).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.evaluation import bounds, cel, cost
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding

EXAMPLES = Path(__file__).parents[2] / "data" / "examples" / "templates"
OVERSELL = EXAMPLES / "override-resourcesoversell.yaml"
RESOURCES = EXAMPLES / "override-resources.yaml"
LABELS = EXAMPLES / "override-labels.yaml"
VARIABLES = {"oldObject": None, "request": {"operation": "CREATE"}}


def _deployment(env: int, containers: int = 2) -> dict[str, Any]:
    first = {"name": "app", "image": "app:1", "env": [{"name": f"E{i}", "value": str(i)} for i in range(env)],
             "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}
    rest = [{"name": f"side{i}", "image": "side:1", "resources": {"limits": {"cpu": "1"}}}
            for i in range(containers - 1)]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "labels": {"kinitiras.kcloudlabs.io/webhook": "enabled"}},
            "spec": {"template": {"spec": {"containers": [first, *rest]}}}}


def _mutate(policy_file: Path, obj: dict[str, Any]) -> overriding.Mutation:
    policy = compile_policy(yaml.safe_load(policy_file.read_text()))
    return overriding.mutate([(policy, rule) for rule in policy.rules], obj, VARIABLES)


def test_the_oversell_template_is_bounded_for_requests_smaller_than_the_largest() -> None:
    # What makes this file's tests meaningful: the bound needs a check of the request.
    policy = compile_policy(yaml.safe_load(OVERSELL.read_text()))
    bound = policy.rules[0].rendered.bound  # type: ignore[union-attr]
    assert bound.items is not None and bound.items < 300
    assert bound.bytes == cost.MAX_REQUEST_BYTES  # any object the API server accepts, in bytes


@pytest.mark.parametrize("env", [300, 2000])
def test_a_long_env_list_does_not_fail_the_oversell_rule(env: int) -> None:
    mutation = _mutate(OVERSELL, _deployment(env))
    assert mutation.failure is None, mutation.failure
    containers = mutation.object["spec"]["template"]["spec"]["containers"]
    assert containers[0]["resources"]["requests"] == {"cpu": "1", "memory": "858993459"}
    assert containers[1]["resources"]["requests"] == {"cpu": "500m"}
    assert len(containers[0]["env"]) == env


@pytest.mark.parametrize("env", [300, 2000])
def test_a_long_env_list_does_not_fail_the_resources_rules(env: int) -> None:
    mutation = _mutate(RESOURCES, _deployment(env))
    assert mutation.failure is None, mutation.failure
    for container in mutation.object["spec"]["template"]["spec"]["containers"]:
        assert container["resources"] == {"limits": {"cpu": "100", "memory": "4Ti"}}


def test_a_configmap_with_many_keys_goes_through_a_labels_policy() -> None:
    data = {f"key{i}": "v" for i in range(5000)}
    policy_obj = yaml.safe_load(LABELS.read_text())
    policy_obj["spec"]["resourceSelectors"] = [{"apiVersion": "v1", "kind": "ConfigMap"}]
    policy = compile_policy(policy_obj)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"xxx-id": "1"}},
          "data": data}
    mutation = overriding.mutate([(policy, rule) for rule in policy.rules], cm,
                                 {"oldObject": cm, "request": {"operation": "UPDATE"}})
    assert mutation.failure is None, mutation.failure
    labels = mutation.object["metadata"]["labels"]
    assert "xxx-id" not in labels and labels["owned-by"] == "cue"


def test_too_many_containers_still_fail_the_rule_naming_the_list() -> None:
    policy = compile_policy(yaml.safe_load(OVERSELL.read_text()))
    bound = policy.rules[0].rendered.bound  # type: ignore[union-attr]
    mutation = _mutate(OVERSELL, _deployment(0, containers=(bound.items or 0) + 1))
    assert mutation.failure is not None
    assert "spec.template.spec.containers" in mutation.failure.reason


def test_a_loop_over_a_list_reached_through_optionals_and_binds_is_measured() -> None:
    program = cel.compile_program(
        "cel.bind(s, object.?spec.orValue({}), s.?items.orValue([]).map(x, x).size()) >= 0")
    assert program.bound.items is not None
    program.evaluate({"object": {"spec": {"items": [1]}, "other": list(range(5000))}})
    with pytest.raises(CelEvalError, match=r"object\.spec\.items"):
        program.evaluate({"object": {"spec": {"items": list(range(5000))}}})


def test_what_is_measured_follows_indexes_by_loop_variables() -> None:
    program = cel.compile_program("range(size(object.l)).map(i, object.l[i].m.map(k, k)).size() >= 0")
    assert set(program.bound.paths or ()) >= {("object", "l"), ("object", "l", "*", "m")}
    assert bounds.longest({"object": {"l": [{"m": {"a": 1}}, {"m": dict.fromkeys("abc", 1)}], "x": [0] * 9}},
                          program.bound.paths or ()) == (3, "object.l[*].m")


@pytest.mark.parametrize("env", [300, 2000])
def test_apply_sets_the_requests_of_a_deployment_with_a_long_env_list(tmp_path: Path, env: int) -> None:
    resource = tmp_path / "d.yaml"
    resource.write_text(yaml.safe_dump(_deployment(env)))
    command = [sys.executable, "-m", "kinitiras_py", "apply", "--policy", str(OVERSELL), "--policy", str(RESOURCES),
               "--resource", str(resource), "-o", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "too large" not in done.stdout + done.stderr


def test_the_alternative_of_an_optional_is_measured_too() -> None:
    program = cel.compile_program("object.?a.orValue(object.b).map(x, x).size() >= 0")
    assert {("object", "a"), ("object", "b")} <= set(program.bound.paths or ())
    with pytest.raises(CelEvalError, match=r"object\.b has 5000"):
        program.evaluate({"object": {"b": list(range(5000))}})


def test_a_name_the_walk_cannot_place_stands_for_any_list_in_the_request() -> None:
    assert bounds.longest({"object": {"a": [{"b": [0] * 7}]}, "params": {}}, (("**",),)) == (7, "**")


def test_a_map_literal_indexed_by_a_computed_key_holds_the_list_it_was_built_with() -> None:
    program = cel.compile_program('{"k": object.l}[object.key].map(x, x).size() >= 0')
    assert program.bound.items is not None and ("object", "l") in (program.bound.paths or ())


def test_strings_read_where_their_length_counts_are_measured() -> None:
    program = cel.compile_program("object.s.split(',').map(x, x).size() >= 0")
    assert program.bound.items is not None
    with pytest.raises(CelEvalError, match=r"object\.s has 5000"):
        program.evaluate({"object": {"s": "a" * 5000}})


def test_a_field_named_by_the_empty_string_is_a_path_like_any_other() -> None:
    paths = (("object", ""), ("object", "", "*"))
    assert bounds.longest({"object": {"": [[0] * 5, [1]]}}, paths) == (5, "object.[*]")


def test_only_the_variables_a_program_reads_are_measured_in_bytes() -> None:
    program = cel.compile_program("object.l.map(x, x).size() >= 0")
    assert program.bound.variables == ("object",) and program.bound.bytes is not None
    huge = {"pad": "x" * (program.bound.bytes + 1)}
    assert program.evaluate({"object": {"l": [1]}, "oldObject": huge}) is True
    with pytest.raises(CelEvalError, match="bytes"):
        program.evaluate({"object": {"l": [1], **huge}})


def test_type_names_are_not_variables_to_measure() -> None:
    # The labels template compares type(have) with map: measuring a "map" variable cost every
    # evaluation a serialisation of nothing.
    program = cel.compile_program(
        "type(object.l) == map || type(object.l) == list ? object.l.map(x, x).size() >= 0 : int(1) == 1")
    assert program.bound.variables == ("object",)
    assert all(path[0] == "object" for path in program.bound.paths or ())
    assert program.evaluate({"object": {"l": [1, 2]}}) is True


def test_the_keys_of_a_map_a_loop_iterates_are_measured() -> None:
    program = cel.compile_program("object.m.map(k, k.split(',').map(x, x)).size() >= 0")
    assert program.bound.items is not None
    with pytest.raises(CelEvalError, match=r"object\.m\[\*\] has 5000"):
        program.evaluate({"object": {"m": {"," * 4999 + "a": 1}}})
