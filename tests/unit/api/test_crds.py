"""The generated CRDs: structural, in sync with api/, and (offline proxy for the API server) accepting
every example while refusing every invalid fixture at the right field."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.api import crds
from kinitiras_py.api.overrides import TEMPLATE_TYPES
from kinitiras_py.api.policies import parse_policy
from kinitiras_py.base.errors import PolicyErrors

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"
EXAMPLES = sorted((DATA / "examples").rglob("*.yaml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))
BY_KIND = {crd["spec"]["names"]["kind"]: crd for crd in crds.build_crds()}


def root_schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = BY_KIND[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


# --- a small structural-schema checker ----------------------------------------------------------


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with a path such as ``spec.overrideRules[].overriders``."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}" if path else name)
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def structural_problems(schema: dict[str, Any]) -> list[str]:
    problems = []
    for path, node in walk(schema):
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
        if "type" not in node and not (int_or_string or preserve):
            problems.append(f"{path}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties with additionalProperties")
        if node.get("type") == "array" and "items" not in node:
            problems.append(f"{path}: array without items")
        if "anyOf" in node and (not int_or_string or node["anyOf"] != INT_OR_STRING):
            problems.append(f"{path}: anyOf other than int-or-string")
        for name in node.get("required", []):
            if name not in node.get("properties", {}):
                problems.append(f"{path}: required {name} is not a property")
        if "enum" in node and node.get("type") != "string":
            problems.append(f"{path}: enum on a non-string")
        if "default" in node and validate(node, node["default"], path):
            problems.append(f"{path}: default does not validate")
        for key in ("x-kubernetes-validations", "nullable", "oneOf", "allOf", "not"):
            if key in node:
                problems.append(f"{path}: {key} is not used")
    if schema["properties"]["metadata"] != {"type": "object"}:
        problems.append("metadata: must be exactly {type: object}")
    return problems


def undocumented(schema: dict[str, Any]) -> list[str]:
    """Properties without a description (metadata is the API server's own)."""
    missing = []
    for path, node in walk(schema):
        for name, sub in node.get("properties", {}).items():
            if not sub.get("description") and name != "metadata":
                missing.append(f"{path}.{name}" if path else name)
    return missing


# --- a small validator: what the API server checks (type, enum, pattern, required, minItems) ----


def validate(schema: dict[str, Any], value: Any, path: str = "") -> list[tuple[str, str]]:
    """Problems of ``value`` against ``schema`` with parser-style paths. Unknown fields are ignored
    (the API server prunes them) and so are null fields (pruned too)."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if schema.get("x-kubernetes-int-or-string"):
        if not (is_int or isinstance(value, str)):
            return [(path, "not int-or-string")]
        return _pattern(schema, value, path)
    kind = schema.get("type")
    if kind is None:  # x-kubernetes-preserve-unknown-fields: anything
        return []
    checks = {"string": isinstance(value, str), "integer": is_int, "boolean": isinstance(value, bool),
              "array": isinstance(value, list), "object": isinstance(value, dict)}
    if not checks[kind]:
        return [(path, f"not {kind}")]
    if "enum" in schema and value not in schema["enum"]:
        return [(path, "not in enum")]
    problems = _pattern(schema, value, path)
    if kind == "array":
        if len(value) < schema.get("minItems", 0):
            problems.append((path, "too few items"))
        for i, item in enumerate(value):
            problems += validate(schema["items"], item, f"{path}[{i}]")
    if kind == "object":
        present = {k: v for k, v in value.items() if v is not None}
        problems += [(f"{path}.{name}" if path else name, "required")
                     for name in schema.get("required", []) if name not in present]
        for key, item in present.items():
            sub = schema.get("properties", {}).get(key)
            if sub is not None:
                problems += validate(sub, item, f"{path}.{key}" if path else key)
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += validate(schema["additionalProperties"], item, f"{path}[{key}]")
    return problems


def _pattern(schema: dict[str, Any], value: Any, path: str) -> list[tuple[str, str]]:
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        return [(path, "does not match pattern")]
    return []


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_schema_is_structural(kind: str) -> None:
    assert structural_problems(root_schema(kind)) == []


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_every_property_is_described(kind: str) -> None:
    assert undocumented(root_schema(kind)) == []


OVERRIDE_ANY_JSON = {"spec.overrideRules[].overriders.plaintext[].value",
                     "spec.overrideRules[].overriders.template.valueRef.http.body",
                     "spec.overrideRules[].overriders.template.sidecar.values{}",
                     "spec.overrideRules[].overriders.template.sidecar.valueRefs{}.http.body",
                     "spec.valueRefs{}.http.body",

                     # a volume's source (emptyDir, configMap...) is core/v1's, checked by its name only
                     "spec.overrideRules[].overriders.template.inject.volumes[]"}
VALIDATE_ANY_JSON = {"spec.validateRules[].template.condition.dataRef.http.body",
                     "spec.validateRules[].template.condition.valueRef.http.body",
                     "spec.valueRefs{}.http.body"}


@pytest.mark.parametrize(("kind", "expected"), [
    ("OverridePolicy", OVERRIDE_ANY_JSON), ("ClusterOverridePolicy", OVERRIDE_ANY_JSON),
    ("ClusterValidatePolicy", VALIDATE_ANY_JSON), ("ValidatePolicy", VALIDATE_ANY_JSON)])
def test_preserve_unknown_fields_only_where_any_json_is_intended(kind: str, expected: set[str]) -> None:
    found = {path for path, node in walk(root_schema(kind))
             if node.get("x-kubernetes-preserve-unknown-fields")}
    assert found == expected


def test_int_or_string_fields() -> None:
    found = {path for path, node in walk(root_schema("ClusterValidatePolicy"))
             if node.get("x-kubernetes-int-or-string")}
    assert found == {"spec.validateRules[].template.condition.valueProcess.operationWith"}
    quantity = root_schema("OverridePolicy")["properties"]["spec"]["properties"]["overrideRules"]["items"][
        "properties"]["overriders"]["properties"]["template"]["properties"]["resources"]["properties"]["limits"]
    assert quantity["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert re.search(quantity["additionalProperties"]["pattern"], "1.5Gi")
    assert not re.search(quantity["additionalProperties"]["pattern"], "1.5 Gi")


def test_crd_names_scope_and_columns() -> None:
    policies = {kind: crd for kind, crd in BY_KIND.items() if crd["spec"]["group"] == "policy.kcloudlabs.io"}
    summary = {kind: (crd["metadata"]["name"], crd["spec"]["scope"], crd["spec"]["names"]["shortNames"],
                      crd["spec"]["names"]["categories"], crd["spec"]["names"]["listKind"])
               for kind, crd in policies.items()}
    assert summary == {
        "OverridePolicy": ("overridepolicies.policy.kcloudlabs.io", "Namespaced", ["op"], ["kinitiras"],
                           "OverridePolicyList"),
        "ClusterOverridePolicy": ("clusteroverridepolicies.policy.kcloudlabs.io", "Cluster", ["cop"],
                                  ["kinitiras"], "ClusterOverridePolicyList"),
        "ClusterValidatePolicy": ("clustervalidatepolicies.policy.kcloudlabs.io", "Cluster", ["cvp"],
                                  ["kinitiras"], "ClusterValidatePolicyList"),
        "ValidatePolicy": ("validatepolicies.policy.kcloudlabs.io", "Namespaced", ["vp"], ["kinitiras"],
                           "ValidatePolicyList"),
    }
    for crd in policies.values():
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        (version,) = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert version["subresources"] == {"status": {}}
        assert [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
            ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
            ("Rules", "integer", ".status.ruleCount"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]


def test_report_crds_names_scope_and_columns() -> None:
    """The wg-policy kinds: scope, names, and the columns `kubectl get policyreport -A` shows."""
    found = {kind: (BY_KIND[kind]["metadata"]["name"], BY_KIND[kind]["spec"]["scope"],
                    BY_KIND[kind]["spec"]["names"]["shortNames"])
             for kind in ("PolicyReport", "ClusterPolicyReport")}
    assert found == {"PolicyReport": ("policyreports.wgpolicyk8s.io", "Namespaced", ["polr"]),
                     "ClusterPolicyReport": ("clusterpolicyreports.wgpolicyk8s.io", "Cluster", ["cpolr"])}
    for kind in found:
        (version,) = BY_KIND[kind]["spec"]["versions"]
        assert version["name"] == "v1alpha2"
        columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"] if "priority" not in c]
        assert columns == [("Pass", ".summary.pass"), ("Fail", ".summary.fail"), ("Warn", ".summary.warn"),
                           ("Error", ".summary.error"), ("Skip", ".summary.skip"),
                           ("Age", ".metadata.creationTimestamp")]
        result = root_schema(kind)["properties"]["results"]["items"]
        assert result["properties"]["result"]["enum"] == ["pass", "fail", "warn", "error", "skip"]
        assert result["required"] == ["policy"]
        assert set(root_schema(kind)["properties"]["summary"]["properties"]) == {"pass", "fail", "warn", "error",
                                                                                 "skip"}


def test_required_defaults_and_min_items() -> None:
    for kind in ("ClusterOverridePolicy", "OverridePolicy", "ClusterValidatePolicy", "ValidatePolicy"):
        assert root_schema(kind)["required"] == ["spec"]  # a policy without a spec does nothing
    override_spec = root_schema("OverridePolicy")["properties"]["spec"]
    assert override_spec["required"] == ["overrideRules"]
    rules = override_spec["properties"]["overrideRules"]
    assert rules["minItems"] == 1
    assert rules["items"]["required"] == ["overriders"]
    assert rules["items"]["properties"]["failurePolicy"]["default"] == "Fail"
    validate_rules = root_schema("ValidatePolicy")["properties"]["spec"]["properties"]["validateRules"]
    assert validate_rules["minItems"] == 1
    rule = validate_rules["items"]["properties"]
    assert (rule["failurePolicy"]["default"], rule["failurePolicy"]["enum"]) == ("Fail", ["Fail", "Ignore"])
    actions = rule["validationActions"]
    assert (actions["default"], actions["minItems"], actions["items"]["enum"]) == (
        ["Deny"], 1, ["Deny", "Warn", "Audit"])
    assert rule["targetOperations"]["items"]["enum"] == ["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]
    condition = rule["template"]["properties"]["condition"]["properties"]
    assert condition["cond"]["enum"][-1] == "Regex"
    assert condition["affectMode"]["default"] == "reject"


# --- drift ---------------------------------------------------------------------------------------


def test_generated_files_in_api_match_the_models() -> None:
    """Run ``python -m kinitiras_py.api.crds api`` after changing a model."""
    expected = crds.crd_files()
    on_disk = {p.name for p in (ROOT / "api").glob("*.yaml")}
    assert on_disk == set(expected)
    for name, text in expected.items():
        assert (ROOT / "api" / name).read_text(encoding="utf-8") == text, f"api/{name} is stale"
    loaded = [yaml.safe_load(text) for name, text in expected.items() if name != "kustomization.yaml"]
    assert loaded == crds.build_crds()


def test_write_crds_writes_every_file(tmp_path: Path) -> None:
    written = crds.write_crds(tmp_path / "out")
    assert [p.name for p in written] == [
        "policy.kcloudlabs.io_overridepolicies.yaml", "policy.kcloudlabs.io_clusteroverridepolicies.yaml",
        "policy.kcloudlabs.io_clustervalidatepolicies.yaml", "policy.kcloudlabs.io_validatepolicies.yaml",
        "wgpolicyk8s.io_policyreports.yaml", "wgpolicyk8s.io_clusterpolicyreports.yaml", "kustomization.yaml"]
    assert yaml.safe_load(written[-1].read_text())["resources"] == [p.name for p in written[:-1]]


# --- examples against the schema (offline proxy for the API server) ---------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_against_its_crd(path: Path) -> None:
    obj = load(path)
    assert validate(root_schema(obj["kind"]), obj) == []


def must_name(path: Path) -> str:
    return next(line.split(":", 1)[1].strip() for line in path.read_text().splitlines()
                if line.startswith("# must-name:"))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_every_invalid_fixture_is_refused_by_the_schema_at_the_named_field(path: Path) -> None:
    obj = load(path)
    problems = validate(root_schema(obj["kind"]), obj)
    assert must_name(path) in [where for where, _ in problems]


LABELS_EXAMPLE = load(DATA / "examples/templates/override-labels.yaml")


@given(st.one_of(st.sampled_from(TEMPLATE_TYPES), st.text(max_size=20)))
def test_parser_and_schema_agree_on_template_types(value: str) -> None:
    obj = copy.deepcopy(LABELS_EXAMPLE)
    obj["spec"]["overrideRules"][1]["overriders"]["template"]["type"] = value
    # every type takes add (inject takes nothing else, a check the CRD schema cannot express)
    obj["spec"]["overrideRules"][1]["overriders"]["template"]["operation"] = "add"
    schema_ok = validate(root_schema("OverridePolicy"), obj) == []
    try:
        parse_policy(obj)
        parser_ok = True
    except PolicyErrors:
        parser_ok = False
    assert schema_ok == parser_ok == (value in TEMPLATE_TYPES)
