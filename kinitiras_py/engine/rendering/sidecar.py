"""The ``sidecar`` template → CEL: what a pod gets, and the checks it must pass first.

The jinja2 template is rendered once (:mod:`.symbolic`), its YAML checked, and the result written
as one CEL expression: per-pod values become CEL string expressions joined into the constant
parts, so a label value can never change the YAML's shape. The expression returns the JSON patch
operations, ``{"deny": reason}`` (a required label missing, a container without ports) or
``{"error": reason}`` (a value the template reads is missing, a name already taken).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping
from typing import Any

import jinja2
import orjson
import yaml

from kinitiras_py.api.policies import GROUP
from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.api.sidecar import SidecarTemplate
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.rendering import symbolic
from kinitiras_py.engine.rendering.environment import cel_literal, cel_string, make_environment, ref_expr
from kinitiras_py.engine.rendering.render import check_ref

LISTS = ("containers", "initContainers", "volumes", "imagePullSecrets")
FIELDS = (*LISTS, "annotations")
_INT64 = (-(2**63), 2**63 - 1)
PARAM_PREFIX = "sidecar."
"""``params`` names of the valueRefs that are fetched (k8s, owner, http): ``sidecar.<name>``."""


def marker_key(policy_name: str) -> str:
    """The pod annotation saying this policy's sidecar is in: ``policy.kcloudlabs.io/sidecar-<name>``
    (names too long for an annotation key keep 46 characters and a hash)."""
    name = f"sidecar-{policy_name}"
    if len(name) > 63:
        digest = hashlib.sha256(policy_name.encode()).hexdigest()[:8]
        name = f"{name[:54].rstrip('-.')}-{digest}"
    return f"{GROUP}/{name}"


def context(values: Obj, refs: Mapping[str, ResourceRefer | None], scope: symbolic.Scope) -> dict[str, Any]:
    """What the template sees: constants (``values``), per-pod values (``refs``, by name) and the
    built-ins."""
    per_pod = {
        "object": symbolic.PerPod(scope, "optional.of(object)", "object", printable=False),
        "labels": symbolic.PerPod(scope, "optional.of(labels)", "labels", printable=False),
        "annotations": symbolic.PerPod(scope, "optional.of(podAnnotations == null ? dyn({}) : podAnnotations)",
                                      "annotations", printable=False),
        "namespace": symbolic.PerPod(scope, "optional.of(podNamespace)", "namespace", nested=False),
        "name": symbolic.PerPod(scope, "optional.of(podName)", "name", nested=False),
        "generateName": symbolic.PerPod(scope, 'object.?metadata.?generateName', "generateName", nested=False),
        "appPorts": symbolic.PerPod(scope, "optional.of(appPorts)", "appPorts", nested=False),
    }
    value_refs = {name: symbolic.PerPod(scope, ref_expr(ref, PARAM_PREFIX + name), f"valueRefs.{name}")
                  for name, ref in refs.items() if ref is not None}
    return {**per_pod, "values": values, "valueRefs": value_refs}


class _Loader(yaml.SafeLoader):
    """YAML as kubectl reads it, minus timestamps (kept as text, as go-yaml does into JSON)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _json(value: Any, where: str) -> JSON:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise PolicyError(where, f"the rendered YAML has a key that is not a string: {key!r}")
            if symbolic.MARKER.search(key):
                raise PolicyError(where, f"a key may not contain a per-pod value: {_shown(key)!r}")
        return {k: _json(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v, where) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise PolicyError(where, f"the rendered YAML holds {value}, which JSON cannot")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        raise PolicyError(where, f"the rendered YAML holds {value}, beyond a 64-bit integer (quote it)")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise PolicyError(where, f"the rendered YAML holds a {type(value).__name__}, which JSON cannot")


def _out_of_range(value: JSON) -> JSON:
    """The first integer beyond 64 bits or non-finite number in ``value``, or None."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return next((found for v in value if (found := _out_of_range(v)) is not None), None)
    if isinstance(value, float) and not math.isfinite(value):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        return value
    return None


def _shown(text: str) -> str:
    return symbolic.MARKER.sub("<per-pod value>", text)


def parse_output(text: str, where: str) -> Obj:
    """The rendered YAML, checked: a map of the five fields, named items, string annotations."""
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise PolicyError(where, f"the rendered template is not valid YAML: {_shown(str(e))}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise PolicyError(where, f"the rendered template must be a map of {', '.join(FIELDS)}")
    doc = _json(doc, where)
    assert isinstance(doc, dict)
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise PolicyError(where, f"unknown field {unknown[0]!r} in the rendered template; "
                                 f"it may add {', '.join(FIELDS)}")
    if not any(doc.get(f) for f in FIELDS):
        raise PolicyError(where, "the rendered template adds nothing")
    seen: dict[str, set[str]] = {"container": set(), "volume": set(), "image pull secret": set()}
    for name in LISTS:
        items = doc.get(name) or []
        if not isinstance(items, list):
            raise PolicyError(where, f"{name} must be a list")
        kind = {"volumes": "volume", "imagePullSecrets": "image pull secret"}.get(name, "container")
        for i, item in enumerate(items):
            label = item.get("name") if isinstance(item, dict) else None
            if not isinstance(label, str) or not label or symbolic.MARKER.search(label):
                raise PolicyError(where, f"{name}[{i}] needs a name that is a constant string")
            if label in seen[kind]:
                raise PolicyError(where, f"{name}[{i}]: two {kind}s are named {label!r}")
            seen[kind].add(label)
    annotations = doc.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise PolicyError(where, "annotations must be a map of strings")
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise PolicyError(where, f"annotation {key!r}: the value must be a string (quote it), got {value!r}")
        if problem := selectors.annotation_key_problem(key):
            raise PolicyError(where, problem)
    return doc


def cel_value(value: JSON) -> str:
    """CEL for a rendered value: markers inside strings become ``v[i]``, joined with ``+``."""
    if isinstance(value, str):
        parts: list[str] = []
        last = 0
        for match in symbolic.MARKER.finditer(value):
            if match.start() > last:
                parts.append(cel_string(value[last:match.start()]))
            parts.append(f"v[{match.group(1)}]")
            last = match.end()
        if last < len(value) or not parts:
            parts.append(cel_string(value[last:]))
        return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(cel_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel_string(k)}: {cel_value(v)}" for k, v in value.items()) + "}"
    return cel_literal(value)


@functools.cache
def _cel_environment() -> jinja2.Environment:
    return make_environment()


def render_sidecar(spec: SidecarTemplate, text: str, where: str, source: str, policy_ref: str,
                   policy_name: str) -> str:
    """CEL source of a sidecar template whose jinja2 text is ``text`` (inline or from ``source``,
    e.g. ``ConfigMap ns/name key k``); PolicyError naming ``where`` when it cannot work."""
    scope = symbolic.Scope()
    # The template sees maps in key order, whatever order the policy wrote them in.
    values = orjson.loads(orjson.dumps(spec.values, option=orjson.OPT_SORT_KEYS))
    try:
        output = symbolic.render(text, context(values, dict(sorted(spec.value_refs.items())), scope))
    except symbolic.PerPodUse as e:
        raise PolicyError(where, f"{e}: per-pod values differ from pod to pod, so the template may only "
                                 "print them (optionally with | default(...)); decide with values instead") from None
    except ValueError as e:
        raise PolicyError(where, str(e)) from None
    doc = parse_output(output, where)
    marker = marker_key(policy_name)
    annotations = doc.get("annotations") or {}
    if marker in annotations:
        raise PolicyError(where, f"annotation {marker!r} is the marker of this policy's sidecar; it is set for you")
    entries = {marker: policy_ref, **annotations}
    required = [str(label) for label in spec.required_labels]
    return _cel_environment().get_template("sidecar.cel.j2").render(
        source=source, ref=policy_ref, marker=marker, required=required,
        ports=spec.require_container_ports, slots=scope.slots,
        lists={name: [cel_value(item) for item in doc.get(name) or []] for name in LISTS},
        names={name: [str(item["name"]) for item in doc.get(name) or []] for name in LISTS},
        annotations={key: cel_value(value) for key, value in entries.items()},
    ).strip() + "\n"


def check_options(spec: SidecarTemplate, path: str, cluster_scoped: bool) -> list[PolicyError]:
    """Problems with a sidecar block outside its template text."""
    errors = []
    for name, value in spec.values.items():
        if (bad := _out_of_range(value)) is not None:
            errors.append(PolicyError(f"{path}.values[{name}]", f"{bad} is beyond what JSON and CEL hold "
                                                                "(a 64-bit integer, a finite number)"))
    for i, label in enumerate(spec.required_labels):
        for problem in selectors.validate_label_selector({"matchLabels": {str(label): ""}}, path):
            errors.append(PolicyError(f"{path}.requiredLabels[{i}]", problem.reason))
    ref = spec.config_map_ref
    if ref is not None and cluster_scoped and not ref.namespace:
        errors.append(PolicyError(f"{path}.configMapRef.namespace", "a cluster-scoped policy must name the "
                                                                    "ConfigMap's namespace"))
    for name, value in spec.value_refs.items():
        if not name.isidentifier():
            errors.append(PolicyError(f"{path}.valueRefs[{name}]", "the name must be an identifier "
                                                                   "(letters, digits, _), as the template reads it"))
        elif value is not None:
            try:
                check_ref(value, f"{path}.valueRefs[{name}]")
            except PolicyError as e:
                errors.append(e)
    return errors
