"""SuperGloo's ``supergloo.solo.io/v1`` ``Mesh`` with App Mesh auto-injection → a
``ClusterOverridePolicy`` with a ``sidecar`` template.

What the App Mesh injector did for such a mesh, and what the policy says instead:

* pods matching the mesh's injection selector (pod labels, or a list of namespaces) got the
  patch on CREATE → ``resourceSelectors`` on Pods, ``targetOperations: [CREATE]``;
* a pod matching two meshes was refused → every converted mesh is in sidecar ``group: appmesh``;
* the pod had to carry the virtual node label, and every container a containerPort → the
  template's ``requiredLabels`` and ``requireContainerPorts``;
* the patch was the one data entry of the mesh's ConfigMap (default ``supergloo-system/
  sidecar-injector``), a Go template of ``.MeshName``, ``.VirtualNodeName``, ``.AwsRegion`` and
  ``.AppPort`` → the same text with those four actions written for jinja2 (``values.meshName``,
  the label, ``values.awsRegion``, ``appPorts``), inline in the policy. Any other Go construct is
  reported, with the field, rather than guessed at.

Only ``containers`` and ``initContainers`` of the patch were injected, so a patch with other
fields is reported too (ours would add them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from kinitiras_py.api.policies import API_VERSION
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert.registry import Conversion, Problem, register
from kinitiras_py.engine.rendering import sidecar, symbolic

GROUP = "supergloo.solo.io"
DEFAULT_CONFIGMAP = ("supergloo-system", "sidecar-injector")
"""The ConfigMap SuperGloo created (in its own namespace, supergloo-system by default) and the
injector read when a mesh named none."""
SIDECAR_GROUP = "appmesh"
INJECTED = ("containers", "initContainers")
_ACTION = re.compile(r"\{\{(-\s)?\s*(.*?)\s*(\s-)?\}\}", re.DOTALL)
_JINJA_OPENERS = ("{%", "{#")

DEFAULT_TEMPLATE = """\
# Written by kinitiras-py for a Mesh that names no sidecarPatchConfigMap: the envoy proxy and its
# traffic-redirecting init container, as App Mesh's injector added them.
containers:
  - name: envoy
    image: {{ values.envoyImage }}
    securityContext:
      runAsUser: 1337
    env:
      - {name: APPMESH_VIRTUAL_NODE_NAME, value: "mesh/{{ values.meshName }}/virtualNode/{{ labels[%(label)s] }}"}
      - {name: ENVOY_LOG_LEVEL, value: debug}
      - {name: AWS_REGION, value: "{{ values.awsRegion }}"}
initContainers:
  - name: proxyinit
    image: {{ values.proxyInitImage }}
    securityContext:
      capabilities:
        add: [NET_ADMIN]
    env:
      - {name: APPMESH_START_ENABLED, value: "1"}
      - {name: APPMESH_IGNORE_UID, value: "1337"}
      - {name: APPMESH_ENVOY_INGRESS_PORT, value: "15000"}
      - {name: APPMESH_ENVOY_EGRESS_PORT, value: "15001"}
      - {name: APPMESH_APP_PORTS, value: "{{ appPorts }}"}
      - {name: APPMESH_EGRESS_IGNORED_IP, value: 169.254.169.254}
"""
DEFAULT_IMAGES = {
    "envoyImage": "111345817488.dkr.ecr.us-west-2.amazonaws.com/aws-appmesh-envoy:v1.8.0.2-beta",
    "proxyInitImage": "111345817488.dkr.ecr.us-west-2.amazonaws.com/aws-appmesh-proxy-route-manager:latest",
}
"""The images SuperGloo 0.3's default patch named."""


def translate(go_template: str, label: str) -> tuple[str | None, list[str]]:
    """The jinja2 text of an App Mesh patch template, or None and why it has no exact equivalent."""
    fields = {".MeshName": "values.meshName", ".VirtualNodeName": f"labels[{json.dumps(label)}]",
              ".AwsRegion": "values.awsRegion", ".AppPort": "appPorts"}
    problems: list[str] = []
    out: list[str] = []
    last = 0
    for match in _ACTION.finditer(go_template):
        out.append(go_template[last:match.start()])
        last = match.end()
        body = match.group(2)
        if body not in fields:
            problems.append(f"the Go template action {match.group(0)!r} has no exact equivalent; only "
                            f"{', '.join('{{ ' + f + ' }}' for f in fields)} translate")
            continue
        # Go's {{- and -}} trim the surrounding white space as jinja2's do.
        left, right = ("-" if match.group(1) else ""), ("-" if match.group(3) else "")
        out.append(f"{{{{{left} {fields[body]} {right}}}}}")
    out.append(go_template[last:])
    for opener in _JINJA_OPENERS:
        if opener in go_template:
            problems.append(f"the text {opener!r} is plain text to Go but starts a jinja2 tag")
    return (None if problems else "".join(out)), problems


def _patch_fields(text: str, values: Obj) -> tuple[set[str], str | None]:
    """The top-level fields the translated template renders, or why it does not render."""
    scope = symbolic.Scope()
    try:
        output = symbolic.render(text, sidecar.context(values, {}, scope))
        doc = sidecar.parse_output(output, "")
    except (symbolic.PerPodUse, ValueError, PolicyError) as e:
        return set(), str(e)
    return set(doc), None


def _map(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def _configmap(docs: Sequence[Obj], namespace: str, name: str) -> Obj | None:
    for doc in docs:
        meta = doc.get("metadata") or {}
        if (doc.get("kind") == "ConfigMap" and str(doc.get("apiVersion")) == "v1" and meta.get("name") == name
                and (meta.get("namespace") or "default") == namespace):
            return doc
    return None


def _selectors(app: Obj, source: str, problems: list[Problem]) -> list[Obj]:
    base = "spec.awsAppMesh.injectionSelector"
    chosen = app.get("injectionSelector")
    if not isinstance(chosen, dict) or not chosen:
        problems.append(Problem(source, base, "required when enableAutoInject is true (the injector refused "
                                              "such a mesh)"))
        return []
    for unsupported in ("upstreamSelector", "serviceSelector"):
        if unsupported in chosen:
            problems.append(Problem(source, f"{base}.{unsupported}", "the App Mesh injector did not support it "
                                                                     "(only labelSelector and namespaceSelector)"))
    if isinstance(chosen.get("labelSelector"), dict):
        labels = chosen["labelSelector"].get("labelsToMatch") or {}
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            problems.append(Problem(source, f"{base}.labelSelector.labelsToMatch", "must map label keys to values"))
            return []
        selector: Obj = {"apiVersion": "v1", "kind": "Pod"}
        if labels:
            selector["labelSelector"] = {"matchLabels": {str(k): v for k, v in labels.items()}}
        return [selector]
    if isinstance(chosen.get("namespaceSelector"), dict):
        namespaces = chosen["namespaceSelector"].get("namespaces") or []
        where = f"{base}.namespaceSelector.namespaces"
        if not isinstance(namespaces, list) or not all(isinstance(ns, str) and ns for ns in namespaces):
            problems.append(Problem(source, where, "must be a list of namespace names"))
        elif not namespaces:
            problems.append(Problem(source, where, "an empty list selects no pod; a policy without selectors "
                                                   "would select every one"))
        else:
            return [{"apiVersion": "v1", "kind": "Pod", "namespace": ns} for ns in namespaces]
        return []
    if not any(k in chosen for k in ("upstreamSelector", "serviceSelector")):
        problems.append(Problem(source, base, "set labelSelector or namespaceSelector"))
    return []


def _not_injecting(spec: Obj, where: str, docs: Sequence[Obj]) -> Conversion | None:
    """What becomes of a Mesh the App Mesh injector ignores (another mesh type, or auto-injection
    off): nothing, with a note, and its patch ConfigMap with it. None for a mesh that injects."""
    app = spec.get("awsAppMesh")
    if app is not None and not isinstance(app, dict):
        return Conversion(problems=[Problem(where, "spec.awsAppMesh", "must be an object")])
    inject = app.get("enableAutoInject") if app is not None else None
    if inject is not None and not isinstance(inject, bool):
        return Conversion(problems=[Problem(where, "spec.awsAppMesh.enableAutoInject", "must be true or false")])
    if app is not None and inject:
        return None
    if app is None:
        kinds = ", ".join(sorted(spec)) or "no mesh type"
        return Conversion(notes=[f"{where}: skipped: not an App Mesh mesh ({kinds}), which the App Mesh "
                                 "injector ignores"])
    ref = app.get("sidecarPatchConfigMap")
    cm_namespace, cm_name = DEFAULT_CONFIGMAP
    if isinstance(ref, dict):
        cm_namespace, cm_name = str(ref.get("namespace")), str(ref.get("name"))
    configmap = _configmap(docs, cm_namespace, cm_name) if ref is None or isinstance(ref, dict) else None
    with_configmap = f" (and its ConfigMap {cm_namespace}/{cm_name})" if configmap is not None else ""
    return Conversion(consumed=[configmap] if configmap is not None else [],
                      notes=[f"{where}: skipped{with_configmap}: enableAutoInject is not true, so the App Mesh "
                             "injector ignores it"])


def convert_mesh(doc: Obj, source: str, docs: Sequence[Obj]) -> Conversion:
    """A Mesh with App Mesh auto-injection → a ClusterOverridePolicy; any other mesh, which the
    injector ignores, → nothing, with a note."""
    meta = _map(doc.get("metadata"))
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    where = f"{source}: Mesh {namespace + '/' if namespace else ''}{name}"
    if doc.get("spec") is not None and not isinstance(doc.get("spec"), dict):
        return Conversion(problems=[Problem(where, "spec", "must be an object")])
    spec = _map(doc.get("spec"))
    skipped = _not_injecting(spec, where, docs)
    if skipped is not None:
        return skipped
    app = spec["awsAppMesh"]
    problems: list[Problem] = []
    label, region = app.get("virtualNodeLabel"), app.get("region")
    if not isinstance(label, str) or not label:
        problems.append(Problem(where, "spec.awsAppMesh.virtualNodeLabel", "required when enableAutoInject is true"))
    if not isinstance(region, str) or not region:
        problems.append(Problem(where, "spec.awsAppMesh.region", "required: the sidecar's AWS_REGION"))
    selectors = _selectors(app, where, problems)
    ref = app.get("sidecarPatchConfigMap")
    cm_namespace, cm_name = DEFAULT_CONFIGMAP
    if ref is not None:
        if not isinstance(ref, dict) or not all(isinstance(ref.get(k), str) and ref[k] for k in ("name", "namespace")):
            problems.append(Problem(where, "spec.awsAppMesh.sidecarPatchConfigMap", "must name the ConfigMap's "
                                                                                    "namespace and name"))
        else:
            cm_namespace, cm_name = ref["namespace"], ref["name"]
    if problems:
        return Conversion(problems=problems)
    assert isinstance(label, str)
    values: Obj = {"meshName": name, "awsRegion": region}
    configmap = _configmap(docs, cm_namespace, cm_name)
    if configmap is not None:
        text = _from_configmap(configmap, label, values, where, problems)
    elif ref is None:
        text = DEFAULT_TEMPLATE % {"label": json.dumps(label)}
        values.update(DEFAULT_IMAGES)
    else:
        problems.append(Problem(where, "spec.awsAppMesh.sidecarPatchConfigMap",
                                f"ConfigMap {cm_namespace}/{cm_name} is not among the input documents: give it in "
                                "the same input, so that its template can be translated"))
        text = None
    if problems or text is None:
        return Conversion(problems=problems)
    policy = {
        "apiVersion": API_VERSION, "kind": "ClusterOverridePolicy",
        "metadata": {"name": "-".join(p for p in ("appmesh", namespace, name) if p)},
        "spec": {"resourceSelectors": selectors, "overrideRules": [{
            "targetOperations": ["CREATE"], "failurePolicy": "Fail",
            "overriders": {"template": {"type": "sidecar", "operation": "add", "sidecar": {
                "group": SIDECAR_GROUP, "requiredLabels": [label], "requireContainerPorts": True,
                "values": values, "template": text}}}}]},
    }
    return Conversion(documents=[policy], consumed=[configmap] if configmap is not None else [])


def _from_configmap(configmap: Obj, label: str, values: Obj, where: str, problems: list[Problem]) -> str | None:
    meta = configmap.get("metadata") or {}
    what = f"ConfigMap {meta.get('namespace') or 'default'}/{meta.get('name')}"
    data = _map(configmap.get("data"))
    if len(data) != 1:
        problems.append(Problem(where, f"{what}: data", f"the injector needs exactly one entry, found {len(data)}"))
        return None
    key, go_template = next(iter(data.items()))
    if not isinstance(go_template, str):
        problems.append(Problem(where, f"{what}: data[{key}]", "must be the template's text"))
        return None
    text, reasons = translate(go_template, label)
    problems.extend(Problem(where, f"{what}: data[{key}]", reason) for reason in reasons)
    if text is None:
        return None
    fields, error = _patch_fields(text, values)
    if error is not None:
        problems.append(Problem(where, f"{what}: data[{key}]", f"the translated template does not render: {error}"))
    for extra in sorted(fields - set(INJECTED)):
        problems.append(Problem(where, f"{what}: data[{key}].{extra}",
                                "the App Mesh injector ignored it, a sidecar template would add it: remove it"))
    return text


register(GROUP, ["Mesh"], convert_mesh)
