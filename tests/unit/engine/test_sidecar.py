"""The sidecar template: what a pod gets, the App Mesh rules (group, labels, ports), idempotency,
every pod-bearing kind, ConfigMap-kept templates and every error with its message."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.objects import workloads
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.rendering.sidecar import marker_key
from kinitiras_py.engine.rules import sidecars
from kinitiras_py.offline import apply
from kinitiras_py.offline.loader import InputError

TEMPLATE = """\
containers:
  - name: envoy
    image: {{ values.image }}
    securityContext: {runAsUser: 1337}
    env:
      - {name: NODE, value: "mesh/{{ values.mesh }}/virtualNode/{{ labels['virtual-node'] }}"}
      - {name: WHO, value: "{{ namespace }}/{{ name }}"}
initContainers:
  - name: proxyinit
    image: init:1
    securityContext: {capabilities: {add: [NET_ADMIN]}}
    env: [{name: APPMESH_APP_PORTS, value: "{{ appPorts }}"}]
volumes:
  - {name: envoy-config, emptyDir: {}}
imagePullSecrets:
  - {name: mesh-registry}
annotations:
  mesh.example/node: "{{ labels['virtual-node'] }}"
"""


def policy(name: str = "mesh", template: str | None = TEMPLATE, kinds: tuple[tuple[str, str], ...] = (("v1", "Pod"),),
           **sidecar: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"values": {"image": "envoy:1", "mesh": "m1"}, **sidecar}
    if template is not None and "configMapRef" not in block:
        block["template"] = template
    failure = block.pop("failurePolicy", "Fail")
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": a, "kind": k} for a, k in kinds],
                     "overrideRules": [{"failurePolicy": failure, "overriders": {"template": {
                         "type": "sidecar", "operation": "add", "sidecar": block}}}]}}


def pod(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"virtual-node": "web", **labels}},
            "spec": {"containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]},
                                    {"name": "side", "image": "s:1", "ports": [{"containerPort": 9100},
                                                                               {"containerPort": 9101}]}],
                     "initContainers": [{"name": "setup", "image": "s:1", "ports": [{"containerPort": 1}]}],
                     "imagePullSecrets": [{"name": "mesh-registry"}]}}


def run(policies: list[dict[str, Any]], obj: dict[str, Any], context: list[dict[str, Any]] | None = None,
        operation: str = "CREATE", old: dict[str, Any] | None = None) -> apply.Decision:
    return apply.run(apply.Case(policies=policies, resource=obj, context=context or [], operation=operation,
                                old_resource=old))


def configmap(text: str = TEMPLATE, key: str = "sidecar.yaml") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tpl", "namespace": "mesh"},
            "data": {key: text}}


CM_REF = {"namespace": "mesh", "name": "tpl", "key": "sidecar.yaml"}


def test_a_pod_gets_the_sidecar_after_its_own_containers() -> None:
    decision = run([policy()], pod())
    assert decision.allowed, decision.message
    spec, meta = decision.object["spec"], decision.object["metadata"]
    assert [c["name"] for c in spec["containers"]] == ["app", "side", "envoy"]
    assert [c["name"] for c in spec["initContainers"]] == ["setup", "proxyinit"]
    envoy = spec["containers"][2]
    assert envoy["securityContext"] == {"runAsUser": 1337}
    assert envoy["env"] == [{"name": "NODE", "value": "mesh/m1/virtualNode/web"}, {"name": "WHO", "value": "shop/web"}]
    # appPorts: the containers' ports in order, not the init containers'
    assert spec["initContainers"][1]["env"] == [{"name": "APPMESH_APP_PORTS", "value": "80,9100,9101"}]
    assert spec["initContainers"][1]["securityContext"] == {"capabilities": {"add": ["NET_ADMIN"]}}
    assert spec["volumes"] == [{"name": "envoy-config", "emptyDir": {}}]
    assert spec["imagePullSecrets"] == [{"name": "mesh-registry"}]  # already named: not repeated
    assert meta["annotations"] == {"mesh.example/node": "web",
                                   "policy.kcloudlabs.io/sidecar-mesh": "ClusterOverridePolicy mesh"}
    assert {"op": "add", "path": "/spec/containers/2", "value": envoy} in decision.patch


def test_the_inline_template_runs_from_renderedCel() -> None:
    compiled = compile_policy(policy())
    source = compiled.rendered[0]
    assert "sidecar template (inline) of ClusterOverridePolicy mesh" in source
    assert '"mesh/m1/virtualNode/" + v[0]' in source
    assert compiled.rules[0].rendered.source == source


def test_per_pod_text_never_changes_the_yaml() -> None:
    template = 'containers: [{name: s, image: x, env: [{name: A, value: "{{ annotations.note }}"}]}]'
    obj = pod()
    obj["metadata"]["annotations"] = {"note": "a\"b: {c}\n- d # e"}
    decision = run([policy(template=template)], obj)
    assert decision.object["spec"]["containers"][2]["env"] == [{"name": "A", "value": "a\"b: {c}\n- d # e"}]


def test_reinvocation_and_update_never_inject_twice() -> None:
    first = run([policy()], pod())
    again = run([policy()], first.object)
    assert again.allowed and again.patch == [] and again.object == first.object
    update = run([policy()], first.object, operation="UPDATE", old=first.object)
    assert update.allowed and update.patch == []


def test_a_deployment_and_its_pods_are_injected_once() -> None:
    both = policy(kinds=(("apps/v1", "Deployment"), ("v1", "Pod")))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "shop"},
                  "spec": {"template": {"metadata": {"labels": {"virtual-node": "d"}},
                                        "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}}}}
    stored = run([both], deployment).object
    template = stored["spec"]["template"]
    assert [c["name"] for c in template["spec"]["containers"]] == ["app", "envoy"]
    made = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "d-", "namespace": "shop", **copy.deepcopy(template["metadata"])},
            "spec": copy.deepcopy(template["spec"])}
    decision = run([both], made)
    assert decision.allowed and decision.patch == []


KINDS = {"Pod": "v1", "ReplicationController": "v1", "PodTemplate": "v1", "Deployment": "apps/v1",
         "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "ReplicaSet": "apps/v1", "Job": "batch/v1",
         "CronJob": "batch/v1beta1"}


@pytest.mark.parametrize("kind", sorted(workloads.POD_TEMPLATE_PATHS))
def test_every_pod_bearing_kind_gets_it_in_its_pod_template(kind: str) -> None:
    keys = workloads.POD_TEMPLATE_PATHS[kind]
    obj: dict[str, Any] = {"apiVersion": KINDS[kind], "kind": kind, "metadata": {"name": "w", "namespace": "shop"}}
    node = obj
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node["metadata"] = {**node.get("metadata", {}), "labels": {"virtual-node": f"vn-{kind}"}}
    node[keys[-1]] = {"containers": [{"name": "app", "ports": [{"containerPort": 8080}]}]}
    decision = run([policy(kinds=((KINDS[kind], kind),))], obj)
    assert decision.allowed, decision.message
    spec = workloads.pod_spec(decision.object)
    assert spec is not None
    assert [c["name"] for c in spec["containers"]] == ["app", "envoy"]
    assert spec["containers"][1]["env"][0]["value"] == f"mesh/m1/virtualNode/vn-{kind}"
    assert spec["initContainers"][0]["env"] == [{"name": "APPMESH_APP_PORTS", "value": "8080"}]
    assert node["metadata"].get("annotations") is None  # the input is not modified
    pod_meta = decision.object
    for key in keys[:-1]:
        pod_meta = pod_meta[key]
    assert pod_meta["metadata"]["annotations"][marker_key("mesh")] == "ClusterOverridePolicy mesh"


def test_a_pod_template_without_metadata_gets_it() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "namespace": "shop"},
          "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}}}
    template = 'containers: [{name: envoy, image: e}]'
    decision = run([policy(template=template, kinds=(("apps/v1", "ReplicaSet"),))], rs)
    assert decision.object["spec"]["template"]["metadata"] == {
        "annotations": {marker_key("mesh"): "ClusterOverridePolicy mesh"}}


def test_two_policies_of_one_group_deny_naming_both_whatever_the_failure_policy() -> None:
    decision = run([policy("mesh-a", group="appmesh"), policy("mesh-b", group="appmesh", failurePolicy="Ignore")],
                   pod())
    assert not decision.allowed
    assert decision.message == ("policy ClusterOverridePolicy mesh-b, rule 0: the pod matches two sidecar policies "
                                "of group 'appmesh', ClusterOverridePolicy mesh-a and ClusterOverridePolicy mesh-b; "
                                "a pod may have the sidecar of one policy per group")


def test_policies_of_different_groups_both_inject() -> None:
    other = "containers: [{name: logger, image: l}]"
    decision = run([policy("mesh-a", group="mesh"), policy("logs", template=other, group="logging")], pod())
    assert decision.allowed
    # cluster policies run by name: logs, then mesh-a
    assert [c["name"] for c in decision.object["spec"]["containers"]] == ["app", "side", "logger", "envoy"]


@pytest.mark.parametrize("failure", ["Fail", "Ignore"])
def test_a_missing_required_label_denies_naming_it(failure: str) -> None:
    obj = pod()
    del obj["metadata"]["labels"]["virtual-node"]
    decision = run([policy(requiredLabels=["virtual-node"], failurePolicy=failure)], obj)
    assert not decision.allowed
    assert decision.message == ('policy ClusterOverridePolicy mesh, rule 0: the pod has no label "virtual-node", '
                                "which this sidecar requires")


def test_a_container_without_ports_denies_naming_it() -> None:
    obj = pod()
    obj["spec"]["containers"].insert(1, {"name": "worker", "image": "w"})
    decision = run([policy(requireContainerPorts=True)], obj)
    assert not decision.allowed
    assert decision.message == ('policy ClusterOverridePolicy mesh, rule 0: container "worker" declares no '
                                "containerPort; this sidecar needs a port on every container (requireContainerPorts)")
    assert run([policy()], obj).allowed  # without the option, no port is fine


def test_a_value_the_pod_lacks_is_a_rule_error_unless_defaulted() -> None:
    obj = pod()
    del obj["metadata"]["labels"]["virtual-node"]
    decision = run([policy()], obj)
    assert not decision.allowed
    assert decision.message == ("policy ClusterOverridePolicy mesh, rule 0: the sidecar template reads label "
                                "'virtual-node', which this pod does not have")
    ignored = run([policy(failurePolicy="Ignore")], obj)
    assert ignored.allowed and ignored.patch == [] and "which this pod does not have" in ignored.warnings[0]
    defaulted = TEMPLATE.replace("labels['virtual-node']", "labels['virtual-node'] | default('none')")
    assert run([policy(template=defaulted)], obj).object["spec"]["containers"][2]["env"][0]["value"] == \
        "mesh/m1/virtualNode/none"


def test_a_container_name_the_pod_already_uses_is_an_error() -> None:
    obj = pod()
    obj["spec"]["containers"][1]["name"] = "envoy"
    decision = run([policy()], obj)
    assert decision.message == ('policy ClusterOverridePolicy mesh, rule 0: the pod already has a container '
                                'named "envoy"')


def test_value_refs_read_the_object_and_other_objects() -> None:
    template = ('containers: [{name: s, image: "{{ valueRefs.image }}", '
                'env: [{name: P, value: "{{ valueRefs.prio }}"}]}]')
    refs = {"image": {"from": "k8s", "path": "data.image",
                      "k8s": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "mesh", "name": "settings"}},
            "prio": {"from": "current", "path": "spec.priority"}}
    obj = pod()
    obj["spec"]["priority"] = 7
    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "mesh"},
                "data": {"image": "envoy:9"}}
    decision = run([policy(template=template, valueRefs=refs)], obj, [settings])
    assert decision.object["spec"]["containers"][2] == {"name": "s", "image": "envoy:9",
                                                        "env": [{"name": "P", "value": "7"}]}
    missing = run([policy(template=template, valueRefs=refs)], obj)
    assert "ConfigMap mesh/settings not found" in missing.message


def test_a_configmap_template_is_read_at_admission() -> None:
    decision = run([policy(configMapRef=CM_REF)], pod(), [configmap()])
    assert decision.allowed
    assert [c["name"] for c in decision.object["spec"]["containers"]] == ["app", "side", "envoy"]
    assert compile_policy(policy(configMapRef=CM_REF)).rendered == {}  # nothing stored: the ConfigMap is read


def test_a_changed_configmap_renders_again() -> None:
    rule = compile_policy(policy(configMapRef=CM_REF)).rules[0].sidecar
    first = sidecars.program_for(rule, TEMPLATE)
    assert sidecars.program_for(rule, TEMPLATE) is first  # rendered once per text
    changed = TEMPLATE.replace("envoy:1", "envoy:2").replace("{{ values.image }}", "envoy:2")
    assert sidecars.program_for(rule, changed) is not first
    decision = run([policy(configMapRef=CM_REF)], pod(), [configmap(changed)])
    assert decision.object["spec"]["containers"][2]["image"] == "envoy:2"


@pytest.mark.parametrize(("context", "reason"), [
    ([], "sidecar template: ConfigMap mesh/tpl not found"),
    ([configmap(key="other.yaml")], "sidecar template: ConfigMap mesh/tpl has no key 'sidecar.yaml'"),
    ([configmap("containers: [{name: x, image: '{{ labels.a|upper }}'}]")],
     "sidecar template: ConfigMap mesh/tpl key sidecar.yaml: applying 'upper' to label 'a'"),
])
def test_configmap_problems_are_rule_errors_naming_it(context: list[dict[str, Any]], reason: str) -> None:
    failing = run([policy(configMapRef=CM_REF)], pod(), context)
    assert not failing.allowed
    assert failing.message.startswith(f"policy ClusterOverridePolicy mesh, rule 0: {reason}")
    ignored = run([policy(configMapRef=CM_REF, failurePolicy="Ignore")], pod(), context)
    assert ignored.allowed and ignored.patch == []
    assert ignored.warnings[0].startswith(f"policy ClusterOverridePolicy mesh, rule 0: {reason}")


def test_long_policy_names_give_valid_marker_keys() -> None:
    key = marker_key("x" * 253)
    group, name = key.split("/")
    assert group == "policy.kcloudlabs.io" and len(name) <= 63 and name.startswith("sidecar-xxx")
    assert marker_key("y" * 253) != key


def refusal(doc: dict[str, Any]) -> str:
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(doc)
    return str(caught.value)


T = "spec.overrideRules[0].overriders.template"


@pytest.mark.parametrize(("template", "reason"), [
    ("{% if labels.a %}containers: []{% endif %}", "testing label 'a'"),
    ("{% for p in appPorts %}x{% endfor %}", "looping over appPorts"),
    ("{{ labels.a|upper }}", "applying 'upper' to label 'a'"),
    ("{{ labels.a == 'x' }}", "comparing label 'a'"),
    ("{{ labels }}", "labels is a map: print one entry of it"),
    ("{{ namespace.x }}", "reading ['x'] of namespace"),
    ("{{ 'kinitirasPodValue' }}", "may not contain the text 'kinitirasPodValue'"),
    ("{% if %}", "line 1: Expected an expression"),
    ("{{ values.nope }}", "'dict object' has no attribute 'nope'"),
    ("volumes: [{name: v}]\nextra: 1", "unknown field 'extra' in the rendered template"),
    ("containers: [{image: x}]", "containers[0] needs a name that is a constant string"),
    ("containers: [{name: '{{ name }}', image: x}]", "containers[0] needs a name that is a constant string"),
    ("containers: [{name: a}]\ninitContainers: [{name: a}]", "initContainers[0]: two containers are named 'a'"),
    ("annotations: {'{{ name }}': x}", "a key may not contain a per-pod value"),
    ("annotations: {a: 1}", "annotation 'a': the value must be a string (quote it), got 1"),
    ("annotations: {'bad key!': x}", "invalid annotation key 'bad key!'"),
    ("annotations: {'policy.kcloudlabs.io/sidecar-mesh': x}", "is the marker of this policy's sidecar"),
    ("containers: [{name: a", "the rendered template is not valid YAML"),
    ("# nothing", "the rendered template adds nothing"),
    ("- a", "the rendered template must be a map of containers"),
])
def test_templates_that_cannot_work_are_refused_naming_the_field(template: str, reason: str) -> None:
    message = refusal(policy(template=template))
    assert f"{T}.sidecar.template: " in message
    assert reason in message


@pytest.mark.parametrize(("change", "path", "reason"), [
    ({"template": None}, f"{T}.sidecar.template", "set exactly one of template and configMapRef"),
    ({"configMapRef": CM_REF, "template": "x"}, f"{T}.sidecar.template", "set exactly one"),
    ({"configMapRef": {"name": "tpl", "key": "k"}}, f"{T}.sidecar.configMapRef.namespace",
     "a cluster-scoped policy must name the ConfigMap's namespace"),
    ({"requiredLabels": ["bad label"]}, f"{T}.sidecar.requiredLabels[0]", "invalid label key 'bad label'"),
    ({"valueRefs": {"a-b": {"from": "current", "path": "spec"}}}, f"{T}.sidecar.valueRefs[a-b]",
     "the name must be an identifier"),
    ({"valueRefs": {"x": {"from": "k8s"}}}, f"{T}.sidecar.valueRefs[x].k8s", 'required when from is "k8s"'),
    ({"group": 3}, f"{T}.sidecar.group", "must be of type string"),
])
def test_sidecar_options_that_cannot_work_are_refused(change: dict[str, Any], path: str, reason: str) -> None:
    doc = policy()
    block = doc["spec"]["overrideRules"][0]["overriders"]["template"]["sidecar"]
    for key, value in change.items():
        if value is None:
            block.pop(key, None)
        else:
            block[key] = value
    message = refusal(doc)
    assert f"{path}: " in message and reason in message


def test_a_sidecar_template_only_adds() -> None:
    doc = policy()
    doc["spec"]["overrideRules"][0]["overriders"]["template"]["operation"] = "replace"
    assert f"{T}.operation: a sidecar template adds: operation must be add" in refusal(doc)
    doc = policy()
    del doc["spec"]["overrideRules"][0]["overriders"]["template"]["sidecar"]
    assert f"{T}.sidecar: type sidecar needs sidecar" in refusal(doc)


def test_a_namespaced_policy_defaults_the_configmap_namespace() -> None:
    doc = policy(configMapRef={"name": "tpl", "key": "sidecar.yaml"})
    doc["kind"], doc["metadata"]["namespace"] = "OverridePolicy", "mesh"
    assert compile_policy(doc).rules[0].sidecar.config_map == ("mesh", "tpl", "sidecar.yaml")
    obj = pod()
    obj["metadata"]["namespace"] = "mesh"
    decision = run([doc], obj, [configmap()])
    assert decision.allowed and decision.object["metadata"]["annotations"][marker_key("mesh")] == \
        "OverridePolicy mesh/mesh"


def test_render_cel_shows_a_configmap_template(tmp_path: Any) -> None:
    from kinitiras_py.offline.render import configmap_sources

    compiled = compile_policy(policy(configMapRef=CM_REF))
    [(where, source)] = configmap_sources(compiled, [configmap()])
    assert where == "spec.overrideRules[0].overriders.template (ConfigMap mesh/tpl key sidecar.yaml)"
    assert "sidecar template (ConfigMap mesh/tpl key sidecar.yaml)" in source
    with pytest.raises(InputError, match="ConfigMap mesh/tpl not found in --context"):
        configmap_sources(compiled, [])


def test_yaml_in_the_template_reads_as_kubectl_reads_it() -> None:
    template = "containers: [{name: a, image: x, env: [{name: D, value: 2024-01-01}]}]"
    decision = run([policy(template=template)], pod())
    assert decision.object["spec"]["containers"][2]["env"][0]["value"] == "2024-01-01"
    assert yaml.safe_dump(decision.object)


def test_a_template_printing_only_values_every_pod_has() -> None:
    # Found by the fuzz suite: with no optional value among them the list was typed list(string).
    template = 'containers: [{name: s, image: x, env: [{name: P, value: "{{ appPorts }}/{{ name }}"}]}]'
    decision = run([policy(template=template)], pod())
    assert decision.object["spec"]["containers"][2]["env"] == [{"name": "P", "value": "80,9100,9101/web"}]


def test_an_annotation_of_a_pod_without_annotations_takes_its_default() -> None:
    template = ('containers: [{name: s, image: x, env: [{name: L, '
                'value: "{{ annotations.level | default(\'info\') }}"}]}]')
    obj = pod()
    assert "annotations" not in obj["metadata"]
    decision = run([policy(template=template)], obj)
    assert decision.allowed, decision.message
    assert decision.object["spec"]["containers"][2]["env"] == [{"name": "L", "value": "info"}]
    without_default = template.replace(" | default('info')", "")
    assert run([policy(template=without_default)], obj).message.endswith(
        "the sidecar template reads annotation 'level', which this pod does not have")


def test_object_paths_reach_into_lists() -> None:
    template = 'containers: [{name: s, image: "{{ object.spec.containers[1].image }}"}]'
    decision = run([policy(template=template)], pod())
    assert decision.object["spec"]["containers"][2] == {"name": "s", "image": "s:1"}


def test_numbers_beyond_json_and_cel_are_refused_naming_where() -> None:
    # Found by the fuzz suite: a 2^63 constant crashed the check instead of being refused.
    message = refusal(policy(values={"c": 2**63}))
    assert f"{T}.sidecar.values[c]: 9223372036854775808 is beyond what JSON and CEL hold" in message
    message = refusal(policy(template="containers: [{name: a, image: x, n: 99999999999999999999}]"))
    assert f"{T}.sidecar.template: the rendered YAML holds 99999999999999999999, beyond a 64-bit integer" in message


def test_tojson_and_string_keep_a_per_pod_value_exact() -> None:
    template = "containers: [{name: s, image: x, env: [{name: A, value: {{ labels.app | tojson }}}, " \
               "{name: B, value: '{{ name | string }}'}]}]"
    decision = run([policy(template=template)], pod(app="1e3"))
    assert decision.object["spec"]["containers"][2]["env"] == [{"name": "A", "value": "1e3"},
                                                               {"name": "B", "value": "web"}]
    assert "passing label 'a' to 'default'" in refusal(policy(template="{{ 'x' | default(labels.a) }}"))


def test_an_injected_pod_needs_no_configmap() -> None:
    injected = run([policy(configMapRef=CM_REF)], pod(), [configmap()]).object
    # The ConfigMap is gone: a pod that has the sidecar is still admitted (UPDATE, reinvocation).
    decision = run([policy(configMapRef=CM_REF)], injected, [], operation="UPDATE", old=injected)
    assert decision.allowed and decision.patch == [], decision.message
    assert not run([policy(configMapRef=CM_REF)], pod(), []).allowed


def test_a_stale_renderedcel_is_removed_when_the_template_moves_to_a_configmap() -> None:
    from kinitiras_py.admission.policies import rendered_patch
    from kinitiras_py.offline.render import with_rendered

    doc = policy(configMapRef=CM_REF)
    doc["spec"]["overrideRules"][0]["overriders"]["renderedCel"] = "[]"
    compiled = compile_policy(doc)
    assert rendered_patch(doc, compiled) == [{"op": "remove",
                                              "path": "/spec/overrideRules/0/overriders/renderedCel"}]
    assert "renderedCel" not in with_rendered(doc, compiled)["spec"]["overrideRules"][0]["overriders"]
    assert rendered_patch(with_rendered(doc, compiled), compiled) == []


@pytest.mark.parametrize("template", [
    "containers: [{name: a, image: x, args: " + "[" * 30 + "1" + "]" * 30 + "}]",
    "containers: [{name: a, image: \"{{ object." + ".".join(f"k{i}" for i in range(20)) + " }}\"}]",
])
def test_templates_too_deep_for_cel_are_refused_as_such(template: str) -> None:
    assert f"{T}.sidecar.template: the template nests too deeply for CEL" in refusal(policy(template=template))


def test_realistic_nesting_fits() -> None:
    template = """\
containers:
  - name: envoy
    image: x
    livenessProbe:
      httpGet: {path: /ready, port: 9901, httpHeaders: [{name: X, value: "{{ labels['virtual-node'] }}"}]}
    env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
volumes:
  - name: token
    projected: {sources: [{serviceAccountToken: {path: token, audience: "{{ values.mesh }}", expirationSeconds: 600}}]}
"""
    decision = run([policy(template=template)], pod())
    assert decision.object["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["audience"] == "m1"
    probe = decision.object["spec"]["containers"][2]["livenessProbe"]
    assert probe["httpGet"]["httpHeaders"] == [{"name": "X", "value": "web"}]


@pytest.mark.parametrize("field", ["values", "valueRefs"])
@pytest.mark.parametrize("written", [7, "", ["image"]])
def test_a_template_whose_values_failed_their_model_is_not_rendered(field: str, written: Any) -> None:
    """The model leaves such values out: rendering would report ``values.image`` missing instead."""
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(policy(**{field: written}))
    assert [e.path for e in caught.value.errors] == [f"{T}.sidecar.{field}"]


def test_the_template_reads_maps_in_key_order() -> None:
    """Inline and from a ConfigMap alike, whatever order the policy wrote them in."""
    template = "annotations:\n{% for k in values %}  {{ k }}: x\n{% endfor %}"
    sources = [compile_policy(policy(template=template, values=values)).rendered[0]
               for values in ({"b": 1, "a": {"d": 1, "c": 2}}, {"a": {"c": 2, "d": 1}, "b": 1})]
    assert sources[0] == sources[1]
    assert sources[0].index('"a"') < sources[0].index('"b"')
