"""Sidecar rules on the request path: their compiled form and the CEL of a ConfigMap's template
(the one-sidecar-per-group rule, which spans policies, is :mod:`..running.sidecargroups`).

An inline template is rendered to CEL when the policy is admitted (``renderedCel``). A template
kept in a ConfigMap is rendered when the ConfigMap's text is first seen: :func:`program_for` keeps
the CEL of each text it compiled, so a changed ConfigMap (which the informer cache hands over on
the next lookup) is rendered once, and an unchanged one never again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import orjson

from kinitiras_py.api.overrides import OverrideRuleTemplate
from kinitiras_py.api.sidecar import SidecarTemplate
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
    """The ``sidecar`` block as canonical JSON: which version of the block a rendering is of."""
    group: str | None = None
    config_map: tuple[str, str, str] | None = None
    """(namespace, name, key) of the ConfigMap holding the template; None for an inline one."""
    spec: SidecarTemplate = field(default_factory=SidecarTemplate, compare=False, repr=False)
    """The ``sidecar`` block: what a ConfigMap's text is rendered with (``spec_json`` stands for it
    in comparisons, as its dicts cannot be hashed)."""

    @property
    def source(self) -> str:
        """Where the template text is, as messages say it."""
        if self.config_map is None:
            return "inline"
        namespace, name, key = self.config_map
        return f"ConfigMap {namespace}/{name} key {key}"


def rule_for(template: OverrideRuleTemplate, path: str, policy_ref: str, policy_name: str,
             policy_namespace: str | None) -> SidecarRule:
    """The SidecarRule of a checked ``type: sidecar`` template (ConfigMap namespace defaulted)."""
    block = template.sidecar or SidecarTemplate()
    ref = block.config_map_ref
    config_map = None
    if ref is not None:
        config_map = (str(ref.namespace or policy_namespace or ""), str(ref.name), str(ref.key))
    # The block as written tells one version of it from another in the cache of rendered texts.
    return SidecarRule(policy_ref=policy_ref, policy_name=policy_name, path=f"{path}.sidecar",
                       spec_json=orjson.dumps(block.raw, option=orjson.OPT_SORT_KEYS).decode(),
                       group=block.group or None, config_map=config_map, spec=block)


def check_template(template: OverrideRuleTemplate, path: str, cluster_scoped: bool) -> list[PolicyError]:
    """Problems of a ``type: sidecar`` template outside its jinja2 text."""
    errors = []
    if template.operation != "add":
        errors.append(PolicyError(f"{path}.operation", "a sidecar template adds: operation must be add"))
    if template.sidecar is None:
        return [*errors, PolicyError(f"{path}.sidecar", "type sidecar needs sidecar")]
    return errors + rendering.check_options(template.sidecar, f"{path}.sidecar", cluster_scoped)


def render_inline(rule: SidecarRule, text: str) -> str:
    """CEL source of an inline template (PolicyError naming its field)."""
    return rendering.render_sidecar(rule.spec, text, f"{rule.path}.template", "inline", rule.policy_ref,
                                    rule.policy_name)


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
        source = rendering.render_sidecar(rule.spec, text, rule.source, rule.source,
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
