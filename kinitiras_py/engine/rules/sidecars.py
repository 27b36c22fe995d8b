"""Sidecar rules on the request path: their compiled form and the CEL of a ConfigMap's template
(the one-sidecar-per-group rule, which spans policies, is :mod:`..running.sidecargroups`).

An inline template is rendered to CEL when the policy is admitted (``renderedCel``). A template
kept in a ConfigMap is rendered when the ConfigMap's text is first seen: :func:`program_for` keeps
the CEL of each text it compiled, so a changed ConfigMap (which the informer cache hands over on
the next lookup) is rendered once, and an unchanged one never again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import orjson

from kinitiras_py.base.errors import CelCompileError, PolicyError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.objects import workloads
from kinitiras_py.engine.rendering import sidecar as rendering


@dataclass(frozen=True)
class SidecarRule:
    """What the request path needs of a ``sidecar`` template besides its CEL."""

    policy_ref: str
    policy_name: str
    path: str
    """Field path of the template's ``sidecar`` block, for messages."""
    spec_json: str
    """The ``sidecar`` block as canonical JSON: what a ConfigMap's text is rendered with."""
    group: str | None = None
    config_map: tuple[str, str, str] | None = None
    """(namespace, name, key) of the ConfigMap holding the template; None for an inline one."""

    @property
    def source(self) -> str:
        """Where the template text is, as messages say it."""
        if self.config_map is None:
            return "inline"
        namespace, name, key = self.config_map
        return f"ConfigMap {namespace}/{name} key {key}"


def rule_for(template: Obj, path: str, policy_ref: str, policy_name: str,
             policy_namespace: str | None) -> SidecarRule:
    """The SidecarRule of a checked ``type: sidecar`` template (ConfigMap namespace defaulted)."""
    block = template.get("sidecar") or {}
    ref = block.get("configMapRef")
    config_map = None
    if isinstance(ref, dict):
        config_map = (str(ref.get("namespace") or policy_namespace or ""), str(ref.get("name")), str(ref.get("key")))
    return SidecarRule(policy_ref=policy_ref, policy_name=policy_name, path=f"{path}.sidecar",
                       spec_json=orjson.dumps(block, option=orjson.OPT_SORT_KEYS).decode(),
                       group=str(block["group"]) if block.get("group") else None, config_map=config_map)


def check_template(template: Obj, path: str, cluster_scoped: bool) -> list[PolicyError]:
    """Problems of a ``type: sidecar`` template outside its jinja2 text."""
    errors = []
    if template.get("operation") != "add":
        errors.append(PolicyError(f"{path}.operation", "a sidecar template adds: operation must be add"))
    block = template.get("sidecar")
    if not isinstance(block, dict):
        return [*errors, PolicyError(f"{path}.sidecar", "type sidecar needs sidecar")]
    return errors + rendering.check_options(block, f"{path}.sidecar", cluster_scoped)


def render_inline(rule: SidecarRule, text: str) -> str:
    """CEL source of an inline template (PolicyError naming its field)."""
    return rendering.render_sidecar(orjson.loads(rule.spec_json), text, f"{rule.path}.template", "inline",
                                    rule.policy_ref, rule.policy_name)


def compile_source(source: str, where: str) -> cel.Program:
    """Compile a sidecar's CEL; a template nested beyond what CEL's parser holds is named as such."""
    try:
        return cel.compile_program(source)
    except CelCompileError as e:
        if "recursion" in str(e).lower():
            raise PolicyError(where, "the template nests too deeply for CEL, whose parser stops at 32 levels "
                                     "(the sidecar's own CEL takes about 10): nest its YAML less, or read per-pod "
                                     "values fewer keys deep") from None
        raise PolicyError(where, f"invalid CEL: {e}") from None


def program_for(rule: SidecarRule, text: str) -> cel.Program:
    """The compiled CEL of a ConfigMap's template text; PolicyError naming the ConfigMap."""
    found = _compiled(rule, text)
    if isinstance(found, PolicyError):
        raise found
    return found


def source_for(rule: SidecarRule, text: str) -> str:
    """The CEL source of a ConfigMap's template text (what ``render --cel --context`` shows)."""
    return program_for(rule, text).source


@functools.lru_cache(maxsize=256)
def _compiled(rule: SidecarRule, text: str) -> cel.Program | PolicyError:
    # Failures are kept too: a broken ConfigMap is reported on every pod without rendering it again.
    try:
        source = rendering.render_sidecar(orjson.loads(rule.spec_json), text, rule.source, rule.source,
                                          rule.policy_ref, rule.policy_name)
        return compile_source(source, rule.source)
    except PolicyError as e:
        return e


def already_injected(rule: SidecarRule, obj: Obj) -> bool:
    """Whether ``obj``'s pod (template) carries this rule's marker: its template need not be read."""
    path = workloads.pod_spec_path(obj)
    node: object = obj
    for key in (*path[:-1], "metadata", "annotations") if path else ():
        node = node.get(key) if isinstance(node, dict) else None
    return isinstance(node, dict) and rendering.marker_key(rule.policy_name) in node
