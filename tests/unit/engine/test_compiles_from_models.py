"""The compiler reads the typed models (issue 21): after parsing, nothing in the compiler's
packages walks a policy's raw dicts. Every ``.raw`` read and every ``.get(`` call in them is listed
here with the function it is in, so a new one fails until it is justified."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kinitiras_py.engine as engine
from kinitiras_py.api.policies import API_VERSION
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.policies.compiling import compile_policy

PACKAGES = ("policies", "kinds", "checking")
ROOT = Path(engine.__file__).resolve().parent

RAW_READS = {
    # The user's JSON kept as written for run time: resolved references, selectors, patches.
    ("policies/compiling.py", "_assembled"), ("policies/policylevel.py", "value_refs"),
    ("kinds/sidecar.py", "_sidecar"),
    ("kinds/origin.py", "compile_override"), ("kinds/plaintext.py", "compile_override"),
    ("kinds/template.py", "compile_override"), ("kinds/template.py", "compile_check"),
    ("checking/checker.py", "check_http_ref"),
    # Whether a field was written at all, where null or {} means something (a null value to add).
    ("kinds/plaintext.py", "_check_plaintext"), ("kinds/javascript.py", "written"),
    ("kinds/template.py", "_condition_semantics"),
    ("policies/compiling.py", "_selector_warnings"),
}
GET_CALLS = {
    # Run time: what CEL, JavaScript and the object hold, and constant tables; never the policy.
    ("kinds/base.py", "patch_ops"), ("kinds/base.py", "failed"), ("kinds/cel.py", "_constant_override"),
    ("kinds/javascript.py", "step"), ("kinds/plaintext.py", "step"), ("policies/compiled.py", "_at"),
    ("checking/shapes.py", "without_namespace"),
}


RENDERERS = ("rendering/render.py", "rendering/environment.py")
RENDERER_READS = {
    # Tolerations and affinity are written into the CEL as the user wrote them (key order, nulls).
    ("rendering/render.py", "_render_podspec", "raw"),
    # The table of tests by condition, not the policy.
    ("rendering/render.py", "render_condition", "get"),
}


KIND_HELPERS = ("rules/jsrules.py", "rules/jshooks.py", "rules/origin.py", "rules/origin_values.py",
                "rules/sidecars.py", "rendering/sidecar.py")
KIND_HELPER_RAW_READS = {
    # The sidecar block as written tells its versions apart in the cache of rendered ConfigMap texts.
    ("rules/sidecars.py", "rule_for"),
}


def _found(attribute: str, paths: list[Path] | None = None) -> set[tuple[str, str]]:
    """(module, function) of every ``.<attribute>`` in ``paths`` (the packages by default)."""
    if paths is None:
        paths = [path for package in PACKAGES for path in sorted((ROOT / package).glob("*.py"))]
    found = set()
    for path in paths:
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Attribute) and node.attr == attribute:
                    found.add((f"{path.parent.name}/{path.name}", function.name))
    return found


def test_no_helper_walks_raw_dicts() -> None:
    names = {node.id for package in PACKAGES for path in (ROOT / package).glob("*.py")
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
    assert not names & {"dict_of", "list_of"}


def test_raw_json_is_read_only_where_listed() -> None:
    assert _found("raw") == RAW_READS


def test_get_is_called_only_on_run_time_values() -> None:
    assert _found("get") == GET_CALLS


def test_templates_render_from_their_models() -> None:
    """The template renderers read the typed template (``raw`` and ``.get`` only where listed)."""
    paths = [ROOT / name for name in RENDERERS]
    found = {(module, function, attribute) for attribute in ("raw", "get")
             for module, function in _found(attribute, paths)}
    assert found == RENDERER_READS


def test_the_kinds_helpers_read_their_models() -> None:
    """javascript, sidecar and origin load and check from their typed models (origin entries and
    their payloads are applied, and so checked, as the JSON the kind keeps for run time)."""
    assert _found("raw", [ROOT / name for name in KIND_HELPERS]) == KIND_HELPER_RAW_READS


def test_a_field_that_fails_its_model_does_not_hide_the_rest_of_its_rule() -> None:
    """The partial model leaves out the ``cel`` that is not a string: the rule's script is still
    checked (reading the raw dicts, compiling that number gave up on the whole rule)."""
    script = {"source": "function jsa_mutate(obj) { return {Result: obj} }",
              "marker": {"annotation": "not a key!", "name": "r"}}
    policy = {"apiVersion": API_VERSION, "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
              "spec": {"overrideRules": [{"overriders": {"cel": 0.25, "javascript": script}}]}}
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(policy)
    assert [e.path for e in caught.value.errors] == ["spec.overrideRules[0].overriders.cel",
                                                     "spec.overrideRules[0].overriders.javascript.marker.annotation"]


def test_a_constant_that_fails_its_model_does_not_hide_the_key_check() -> None:
    """The label's value fails its model (not a decimal): the template cannot render, and its key
    is still checked (the raw renderer rendered the text it was given)."""
    template = {"type": "labels", "operation": "add", "path": "not a key!", "value": {"float": "abc"}}
    policy = {"apiVersion": API_VERSION, "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
              "spec": {"overrideRules": [{"overriders": {"template": template}}]}}
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(policy)
    assert [e.path for e in caught.value.errors] == ["spec.overrideRules[0].overriders.template.value.float",
                                                     "spec.overrideRules[0].overriders.template.path"]
