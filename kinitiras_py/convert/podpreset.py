"""``settings.k8s.io`` ``PodPreset`` (v1alpha1, removed in Kubernetes 1.20) → an OverridePolicy.

A PodPreset becomes an OverridePolicy of the same name in its namespace: one rule on CREATE of the
Pods its ``spec.selector`` selects, with an ``inject`` template carrying its env, envFrom,
volumeMounts and volumes, ``onConflict: Skip`` (PodPreset admitted a conflicting pod without
the preset) and PodPreset's own annotation as its ``marker``. Every field is checked as the
webhook checks our policy, and a problem is reported at the PodPreset's own field
(``spec.env[0].value``), as is any field PodPreset had and we do not.
"""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.api import policies as models
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert.registry import Conversion, Problem, register
from kinitiras_py.engine.policies.compiling import compile_policy

GROUP = "settings.k8s.io"
INJECTED = ("env", "envFrom", "volumeMounts", "volumes")
MARKER_PREFIX = "podpreset.admission.kubernetes.io/podpreset-"
"""PodPreset's annotation on the pods it changed: this prefix and the preset's name, set to the
preset's resourceVersion."""
_TEMPLATE = "spec.overrideRules[0].overriders.template.inject."
_KEPT_METADATA = ("name", "namespace", "labels", "annotations")


def _metadata(meta: object, source: str, out: Conversion) -> Obj:
    if not isinstance(meta, dict):
        out.problems.append(Problem(source, "metadata", "must be an object with a name"))
        return {}
    if not meta.get("name"):
        out.problems.append(Problem(source, "metadata.name", "a PodPreset needs a name"))
    return {key: meta[key] for key in _KEPT_METADATA if meta.get(key) is not None}


def _marker(meta: Obj, version: object, source: str, out: Conversion) -> Obj:
    """PodPreset's annotation: its key, and as value the resourceVersion the preset was written out
    with (a preset read from the cluster has one); without one, the converted policy's own."""
    marker: Obj = {"key": f"{MARKER_PREFIX}{meta.get('name', '')}"}
    if version is not None and not isinstance(version, str):
        out.problems.append(Problem(source, "metadata.resourceVersion", "must be a string (quote it)"))
    elif version:
        marker["value"] = version
    return marker


def _own_path(path: str) -> str:
    """A field path of the converted policy as the PodPreset's own path."""
    if path == _TEMPLATE + "marker.key":
        return "metadata.name"  # the annotation's key is made of the name
    if path.startswith(_TEMPLATE):
        return "spec." + path[len(_TEMPLATE):]
    if path.startswith("spec.resourceSelectors[0].labelSelector"):
        return "spec.selector" + path[len("spec.resourceSelectors[0].labelSelector"):]
    return path


def convert_pod_preset(doc: Obj, source: str, _all: Sequence[Obj]) -> Conversion:
    """Our OverridePolicy for one PodPreset, or the problems that keep it from being exact."""
    out = Conversion()
    if str(doc.get("apiVersion")) != f"{GROUP}/v1alpha1":
        out.problems.append(Problem(source, "apiVersion", f"only {GROUP}/v1alpha1 PodPresets are known, "
                                    f"got {doc.get('apiVersion')!r}"))
    meta = _metadata(doc.get("metadata"), source, out)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        out.problems.append(Problem(source, "spec", "a PodPreset needs a spec (selector, env, volumes...)"))
        return out
    for key in spec:
        if key not in (*INJECTED, "selector"):
            out.problems.append(Problem(source, f"spec.{key}", "not a PodPreset field: nothing to convert it to"))
    inject: Obj = {key: spec[key] for key in INJECTED if spec.get(key) is not None}
    inject["onConflict"] = "Skip"
    raw_meta = doc.get("metadata")
    inject["marker"] = _marker(meta, raw_meta.get("resourceVersion") if isinstance(raw_meta, dict) else None,
                               source, out)
    selector: Obj = {"apiVersion": "v1", "kind": "Pod"}
    if spec.get("selector") is not None:
        selector["labelSelector"] = spec["selector"]
    policy = {
        "apiVersion": models.API_VERSION, "kind": "OverridePolicy", "metadata": meta,
        "spec": {"resourceSelectors": [selector], "overrideRules": [{
            "targetOperations": ["CREATE"],
            "overriders": {"template": {"type": "inject", "inject": inject}},
        }]},
    }
    try:
        compile_policy(policy)
    except PolicyErrors as e:
        out.problems += [Problem(source, _own_path(error.path), error.reason) for error in e.errors]
    if not out.problems:
        out.documents.append(policy)
    return out


register(GROUP, ["PodPreset"], convert_pod_preset)
