"""A policy dict → a CompiledPolicy: model checks, semantic checks, rendering, CEL compilation.

This is also the policy check the webhook runs when a policy is admitted: every problem is
reported with its field path, all at once. The model (schema) problems and the semantic ones
(selectors, templates, CEL, plaintext, origin) are gathered together; a semantic problem at a
path the model already reported on (the same field, a field inside it, or one enclosing it) is
left out, so each mistake is reported once. Compilation happens once per policy version.

Problems that do not stop a policy from working (credentials written inline, a selector that
can never match, an ignored setting) are returned as ``CompiledPolicy.warnings``.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Any

from kinitiras_py.api import policies as models
from kinitiras_py.base.errors import CelCompileError, CelEvalError, PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine import jsrules, origin, policylevel, selectors, sidecars
from kinitiras_py.engine.compiled import (
    CLUSTER_KINDS,
    CompiledPolicy,
    OverrideRule,
    ValidateRule,
    normalise_operations,
)
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kubemod import fanout
from kinitiras_py.engine.rendering import injecting, render

CUE_REFUSED = ("CUE rules are not supported: kinitiras-py has no CUE runtime. "
               "Write the rule in CEL with the `cel` field instead")
SECRET_FIELDS = ("password", "staticToken")
"""``http.auth`` fields that hold a secret and belong in a Secret (``secretRef``)."""
_REF_SOURCES_WITH_PARAMS = ("k8s", "owner", "http")
_ORDERING_CONDS = ("Gt", "Gte", "Lt", "Lte")
_PROCESSED_CONDS = ("Equal", "NotEqual", *_ORDERING_CONDS)
_LIST_CONDS = ("In", "NotIn")
# The static result types a `cel` rule may have (cel-expr-python type names).
_OVERRIDE_RESULTS = ("LIST", "DYN")
_VALIDATE_RESULTS = ("BOOL", "MAP", "DYN")


def compile_policy(obj: Obj) -> CompiledPolicy:
    """Check and compile a policy; raise PolicyErrors listing every problem with its field path."""
    ref = models.policy_ref(obj) if isinstance(obj, dict) else None
    model_errors: list[PolicyError] = []
    try:
        models.parse_policy(obj)
    except PolicyErrors as e:
        model_errors = list(e.errors)
    if not isinstance(obj, dict) or any(e.path in ("", "apiVersion", "kind") for e in model_errors):
        raise PolicyErrors(model_errors, ref)  # not one of our kinds: nothing more to check
    kind = str(obj["kind"])
    checker = _Checker(ref or kind, tolerant=bool(model_errors))
    spec = _dict(obj.get("spec"))
    meta = _dict(obj.get("metadata"))
    namespace = None if kind in CLUSTER_KINDS else meta.get("namespace")
    checker.name, checker.namespace = str(meta.get("name", "")), namespace
    sels = _list(spec.get("resourceSelectors"))
    checker.run(_check_selectors, sels)
    _selector_warnings(checker, sels, namespace)
    validating = kind in ("ClusterValidatePolicy", "ValidatePolicy")
    field = "validateRules" if validating else "overrideRules"
    build = _validate_rule if validating else _override_rule
    rules: list[Any] = []
    rendered: dict[int, str] = {}
    for i, rule in enumerate(_list(spec.get(field))):
        built = checker.run(build, checker, _dict(rule), i, f"spec.{field}[{i}]")
        if built is not None:
            rules.append(built[0])
            if built[1] is not None:
                # One string per distinct rendered text: many policies render the same template alike.
                rendered[i] = sys.intern(built[1])
    refs = checker.run(policylevel.value_refs, _dict(spec.get("valueRefs"))) or {}
    for name, ref in refs.items():
        _check_http_secrets(checker, ref, f"spec.valueRefs.{name}")
    conditions = checker.run(policylevel.match_conditions, checker, _list(spec.get("matchConditions")), refs,
                             _compile_cel, _user_cel)
    if any(getattr(rule, "inject", None) for rule in rules):
        checker.run(injecting.check_marker, kind, str(meta.get("name", "")))
    errors = model_errors + _not_overlapping(checker.errors, model_errors)
    if errors:
        raise PolicyErrors(errors, ref)
    tier = spec.get("executionTier") if not validating else 0
    return CompiledPolicy(
        kind=kind, name=str(meta.get("name", "")), namespace=namespace,
        uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
        selectors=list(spec.get("resourceSelectors") or []), rules=tuple(rules), rendered=rendered,
        warnings=tuple(checker.warnings), javascript_only=bool(rules) and all(_javascript_only(r) for r in rules),
        conditions=conditions,
        tier=tier if isinstance(tier, int) and not isinstance(tier, bool) else 0,
        rendered_fields=tuple(checker.rendered_fields), refs=refs,
    )


def _javascript_only(rule: OverrideRule | ValidateRule) -> bool:
    """Whether the rule's only part is ``javascript`` (for js-admissions' order)."""
    others = (rule.rendered, rule.cel, *((rule.plaintext, rule.origin) if isinstance(rule, OverrideRule) else ()))
    return rule.javascript is not None and not any(others)


class _Checker:
    """Collects semantic errors and warnings for one policy.

    ``tolerant`` is set when the model already found problems: the raw dicts may then have any
    shape, so a check that trips over one gives up quietly (the model errors say what is wrong).
    """

    def __init__(self, ref: str, tolerant: bool) -> None:
        self.ref = ref
        self.tolerant = tolerant
        self.errors: list[PolicyError] = []
        self.warnings: list[str] = []
        self.name = ""
        self.namespace: str | None = None
        self.rendered_fields: list[tuple[str, str]] = []
        """Rendered CEL other than the rules' renderedCel: (JSON pointer, source)."""

    def warn(self, path: str, message: str) -> None:
        """Record a warning naming the policy and the field."""
        self.warnings.append(f"{self.ref}: {path}: {message}")

    def run(self, fn: Any, *args: Any) -> Any:
        """Call ``fn``; its PolicyError(s) are recorded and None returned."""
        try:
            return fn(*args)
        except PolicyErrors as e:
            self.errors += e.errors
        except PolicyError as e:
            self.errors.append(e)
        except (AttributeError, TypeError, KeyError, ValueError, IndexError):
            if not self.tolerant:
                raise
        return None

    def collect(self, errors: list[PolicyError], fn: Any, *args: Any) -> Any:
        """Call ``fn``; its PolicyError(s) go to ``errors`` and None is returned."""
        try:
            return fn(*args)
        except PolicyErrors as e:
            errors += e.errors
        except PolicyError as e:
            errors.append(e)
        return None


def _dict(value: JSON) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: JSON) -> list[Any]:
    return value if isinstance(value, list) else []


def _enclosing(path: str) -> list[str]:
    """``path`` and every path it lies inside (cut before each ``.`` or ``[``)."""
    return [path[:i] for i, ch in enumerate(path) if ch in ".["] + [path]


def _not_overlapping(errors: list[PolicyError], reported: list[PolicyError]) -> list[PolicyError]:
    """The ``errors`` whose path is not one of ``reported``'s, nor inside one, nor around one.

    Set lookups keep this linear in the paths' length: a policy with thousands of bad entries
    is refused in milliseconds, not minutes (pairwise comparison was quadratic).
    """
    exact = {e.path for e in reported}
    around = {p for e in reported for p in _enclosing(e.path)}
    return [e for e in errors if e.path not in around and not any(p in exact for p in _enclosing(e.path))]


def _check_selectors(sels: list[Any]) -> None:
    errors: list[PolicyError] = []
    for i, sel in enumerate(sels):
        if not isinstance(sel, dict):
            continue
        base = f"spec.resourceSelectors[{i}]"
        if isinstance(sel.get("labelSelector"), dict):
            errors += selectors.validate_label_selector(sel["labelSelector"], f"{base}.labelSelector")
        if isinstance(sel.get("fieldSelector"), dict):
            errors += selectors.validate_field_selector(sel["fieldSelector"], f"{base}.fieldSelector")
    if errors:
        raise PolicyErrors(errors)


def _selector_warnings(checker: _Checker, sels: list[Any], namespace: str | None) -> None:
    for i, sel in enumerate(sels):
        if not isinstance(sel, dict):
            continue
        base = f"spec.resourceSelectors[{i}]"
        if sel.get("name") and (sel.get("labelSelector") or sel.get("fieldSelector")):
            checker.warn(base, "labelSelector and fieldSelector are ignored when name is set")
        if namespace and sel.get("namespace") and sel["namespace"] != namespace:
            checker.warn(f"{base}.namespace", f"this policy only applies in its own namespace {namespace!r}, "
                         f"so a selector for namespace {sel['namespace']!r} never matches")


@functools.lru_cache(maxsize=4096)
def _compile_cel(source: str, path: str) -> cel.Program:
    try:
        return cel.compile_program(source)
    except CelCompileError as e:
        raise PolicyErrors([PolicyError(path, f"invalid CEL: {e}")]) from None


def result_type(program: cel.Program) -> str:
    """The static result type the CEL checker gives ``program`` (``BOOL``, ``LIST<DYN>``, ``DYN``)."""
    return program.result_type


def _user_cel(source: str, path: str, wanted: tuple[str, ...], what: str) -> cel.Program:
    program = _compile_cel(source, path)
    found = result_type(program)
    if found.split("<", 1)[0] not in wanted:
        raise PolicyError(path, f"invalid CEL: the expression evaluates to {found}; {what}")
    return program


def _check_http_secrets(checker: _Checker, ref: JSON, path: str) -> None:
    """Warn about credentials written into the policy instead of a Secret."""
    http = _dict(_dict(ref).get("http"))
    auth = _dict(http.get("auth"))
    for name in SECRET_FIELDS:
        if auth.get(name):
            checker.warn(f"{path}.http.auth.{name}",
                         f"the {name} is written inline in the policy, where anyone allowed to read "
                         "policies can see it; store it in a Secret and reference it with secretRef")
    for header in _dict(http.get("header")):
        if str(header).lower() in ("authorization", "proxy-authorization"):
            checker.warn(f"{path}.http.header.{header}",
                         "a credential header is written inline in the policy; use auth with secretRef")


def _override_rule(checker: _Checker, rule: Obj, index: int, path: str) -> tuple[OverrideRule, str | None]:
    errors: list[PolicyError] = []
    over = _dict(rule.get("overriders"))
    opath = f"{path}.overriders"
    if over.get("cue"):
        errors.append(PolicyError(f"{opath}.cue", CUE_REFUSED))
    source = None
    rendered = None
    refs: dict[str, Obj] = {}
    template = over.get("template")
    sidecar = None
    if isinstance(template, dict) and template.get("type") == "sidecar":
        source, sidecar = _sidecar(checker, errors, template, f"{opath}.template", refs)
        if source is not None:
            rendered = checker.collect(errors, sidecars.compile_source, source, f"{opath}.template.sidecar.template")
    elif isinstance(template, dict):
        tpath = f"{opath}.template"
        source = checker.collect(errors, render.render_override, template, tpath)
        if source is not None:
            rendered = checker.collect(errors, _compile_cel, source, tpath)
            errors += _metadata_keys(template, tpath)
        ref = template.get("valueRef")
        if isinstance(ref, dict):
            _check_http_secrets(checker, ref, f"{tpath}.valueRef")
            if ref.get("from") in _REF_SOURCES_WITH_PARAMS and not template.get("value"):
                refs["valueRef"] = ref
    custom = None
    if over.get("cel"):
        custom = checker.collect(errors, _user_cel, over["cel"], f"{opath}.cel", _OVERRIDE_RESULTS,
                                 "an override must return a list of JSON patch operations")
        if custom is not None:
            errors += _constant_override(custom, f"{opath}.cel")
    script = _javascript(checker, errors, over, jsrules.MUTATE, opath)
    plaintext = _list(over.get("plaintext"))
    errors += _check_plaintext(plaintext, f"{opath}.plaintext")
    fanned: dict[int, tuple[cel.Program, int]] = {}
    for j, op in enumerate(plaintext):
        if isinstance(op, dict) and (op.get("select") is not None or op.get("valueTemplate") is not None):
            where = f"{opath}.plaintext[{j}]"
            made = checker.collect(errors, fanout.render, op, where)
            program = made and checker.collect(errors, _compile_cel, made.source, where)
            if made is not None and program is not None:
                fanned[j] = (program, made.depth)
                checker.rendered_fields.append(
                    (f"/spec/overrideRules/{index}/overriders/plaintext/{j}/renderedCel", sys.intern(made.source)))
    entries = _list(over.get("origin"))
    errors += origin.validate_origin(entries, f"{opath}.origin")
    if not (template or over.get("cel") or "javascript" in over or plaintext or entries or over.get("cue")):
        errors.append(PolicyError(opath, "no overrider: set template, cel, javascript, plaintext or origin"))
    inject = injecting.on_conflict(template)
    if inject is not None:
        errors += injecting.rule_problems(rule, opath)
    if errors:
        raise PolicyErrors(errors)
    operations = rule.get("targetOperations")
    return OverrideRule(
        index=index, operations=normalise_operations(operations or (["CREATE"] if inject else None)),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), rendered=rendered, cel=custom,
        javascript=script, plaintext=plaintext, origin=entries, refs=refs, sidecar=sidecar, fanout=fanned,
        last_applied=rule.get("patchLastApplied") is True, inject=inject,
    ), source


def _javascript(checker: _Checker, errors: list[PolicyError], holder: Obj, function: str,
                path: str) -> jsrules.JsProgram | None:
    """The rule's ``javascript`` loaded for ``function``, its warnings noted; None when absent."""
    if "javascript" not in holder:
        return None
    found = checker.collect(errors, jsrules.compile_javascript, holder["javascript"], function, f"{path}.javascript",
                            checker.ref)
    if found is None:
        return None
    for where, message in found[1]:
        checker.warn(where, message)
    return found[0]


def _sidecar(checker: _Checker, errors: list[PolicyError], template: Obj, path: str,
             refs: dict[str, Obj]) -> tuple[str | None, sidecars.SidecarRule | None]:
    """Check a sidecar template; render it when inline. Fetched valueRefs go into ``refs``."""
    problems = sidecars.check_template(template, path, checker.namespace is None)
    if problems:
        errors += problems
        return None, None
    rule = sidecars.rule_for(template, path, checker.ref, checker.name, checker.namespace)
    block = _dict(template.get("sidecar"))
    for name, ref in _dict(block.get("valueRefs")).items():
        _check_http_secrets(checker, ref, f"{path}.sidecar.valueRefs[{name}]")
        if _dict(ref).get("from") in _REF_SOURCES_WITH_PARAMS:
            refs[sidecars.rendering.PARAM_PREFIX + str(name)] = ref
    if rule.config_map is not None:
        return None, rule
    return checker.collect(errors, sidecars.render_inline, rule, str(block.get("template"))), rule


def _metadata_keys(template: Obj, path: str) -> list[PolicyError]:
    """Annotation and label keys must be qualified names, label values valid label values."""
    kind = template.get("type")
    if kind not in ("annotations", "labels"):
        return []
    value = _dict(template.get("value"))
    # (key, where the key is written, label value or None, where the value is written)
    entries: list[tuple[Any, str, Any, str]] = []
    if value.get("stringMap") and template.get("operation") != "remove":
        entries = [(k, f"{path}.value.stringMap[{k}]", v, f"{path}.value.stringMap[{k}]")
                   for k, v in _dict(value["stringMap"]).items()]
    elif isinstance(template.get("path"), str):
        # A remove names its key in path; its value (if any) is ignored.
        text = (render.constant_text(value, f"{path}.value")
                if value and template.get("operation") != "remove" else None)
        entries = [(template["path"], f"{path}.path", text, f"{path}.value")]
    errors = []
    for key, key_path, text, value_path in entries:
        labels = {key: text if kind == "labels" and isinstance(text, str) else ""}
        for problem in selectors.validate_label_selector({"matchLabels": labels}, key_path):
            if problem.reason.startswith("invalid label key"):
                errors.append(PolicyError(key_path, problem.reason.replace("label key", f"{kind[:-1]} key")))
            else:
                errors.append(PolicyError(value_path, problem.reason.replace("invalid value", "invalid label value")))
    return errors


_INPUTS = re.compile(r"\b(?:" + "|".join(cel.VARIABLES) + r")\b")
_POINTER = re.compile(r"(/([^~/]|~[01])*)*")
_PATCH_OPS = {"add": "value", "replace": "value", "test": "value", "remove": None, "move": "from", "copy": "from"}


def _constant_override(program: cel.Program, path: str) -> list[PolicyError]:
    """A `cel` overrider that names no input returns the same operations on every request:
    check them once, now, instead of failing every request."""
    if _INPUTS.search(program.source):
        return []
    try:
        ops = program.evaluate({})
    except CelEvalError as e:
        return [PolicyError(path, f"the expression reads no input and fails on every request: {e}")]
    problems = []
    for i, op in enumerate(ops if isinstance(ops, list) else [ops]):
        name = op.get("op") if isinstance(op, dict) else None
        if name not in _PATCH_OPS:
            problems.append(f"[{i}] has no op among {', '.join(_PATCH_OPS)}")
        elif not isinstance(op.get("path"), str) or not _POINTER.fullmatch(op["path"]):
            problems.append(f"[{i}] ({name}) has no path that is a JSON pointer")
        elif _PATCH_OPS[name] and _PATCH_OPS[name] not in op:
            problems.append(f"[{i}] ({name}) has no {_PATCH_OPS[name]}")
    if not problems:
        return []
    return [PolicyError(path, "the expression reads no input and always returns invalid JSON patch operations: "
                              + "; ".join(problems))]


def _check_plaintext(ops: list[Any], path: str) -> list[PolicyError]:
    errors = []
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            errors.append(PolicyError(f"{path}[{i}]", "must be an object"))
            continue
        if op.get("op") not in ("add", "replace", "remove"):
            errors.append(PolicyError(f"{path}[{i}].op", f"must be add, replace or remove; got {op.get('op')!r}"))
        target = op.get("path")
        if not isinstance(target, str) or (target and not target.startswith("/")):
            errors.append(PolicyError(f"{path}[{i}].path", f"must be a JSON pointer starting with '/'; got {target!r}"))
        if op.get("op") in ("add", "replace") and "value" not in op and op.get("valueTemplate") is None:
            errors.append(PolicyError(f"{path}[{i}].value", f"op {op.get('op')} needs a value (or a valueTemplate)"))
    return errors


def _condition_semantics(cond: Obj, path: str) -> list[PolicyError]:
    """Combinations the renderer accepts but that could only fail or mislead at run time."""
    errors = []
    op = cond.get("cond")
    value = cond.get("value")
    constant = None
    if isinstance(value, dict) and not isinstance(cond.get("valueRef"), dict):
        try:
            constant = render.constant_value(value, f"{path}.value")
        except PolicyError:
            constant = None
    if op in _LIST_CONDS and constant is not None and not isinstance(constant, list):
        errors.append(PolicyError(f"{path}.value", f"{op} needs a list: set stringSlice, integerSlice or "
                                  f"floatSlice (got a single value {constant!r})"))
    if op in _ORDERING_CONDS and isinstance(constant, list | dict | bool):
        errors.append(PolicyError(f"{path}.value", f"{op} compares a number or a string, got {constant!r}"))
    if cond.get("valueProcess"):
        if op not in _PROCESSED_CONDS:
            errors.append(PolicyError(f"{path}.valueProcess",
                                      f"valueProcess applies to {', '.join(_PROCESSED_CONDS)} only, not {op}"))
        elif constant is not None and not _numeric(constant):
            errors.append(PolicyError(f"{path}.value", f"valueProcess needs a number, got {constant!r}"))
    return errors


def _reject_source(text: str, path: str) -> str:
    """CEL refusing the request with the rendered ``text`` as the reason."""
    message = fanout.with_scope(fanout.template_cel(text, path), "null", ())
    return f'{{"valid": false, "reason": {message}}}'


def _numeric(value: JSON) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def _validate_rule(checker: _Checker, rule: Obj, index: int, path: str) -> tuple[ValidateRule, str | None]:
    errors: list[PolicyError] = []
    if rule.get("cue"):
        errors.append(PolicyError(f"{path}.cue", CUE_REFUSED))
    source = None
    rendered = None
    refs: dict[str, Obj] = {}
    message = ""
    allow_mode = False
    template = rule.get("template")
    if isinstance(template, dict):
        source = checker.collect(errors, render.render_condition, template, f"{path}.template")
        if source is not None:
            rendered = checker.collect(errors, _compile_cel, source, f"{path}.template")
        cond = _dict(template.get("condition"))
        cpath = f"{path}.template.condition"
        if source is not None:
            errors += _condition_semantics(cond, cpath)
        message = str(cond.get("message") or "")
        allow_mode = cond.get("affectMode") == "allow"
        for name in ("dataRef", "valueRef"):
            ref = cond.get(name)
            if isinstance(ref, dict):
                _check_http_secrets(checker, ref, f"{cpath}.{name}")
                if ref.get("from") in _REF_SOURCES_WITH_PARAMS:
                    refs[name] = ref
    custom = None
    if rule.get("cel"):
        custom = checker.collect(errors, _user_cel, rule["cel"], f"{path}.cel", _VALIDATE_RESULTS,
                                 "a validate rule must return a bool or a map {valid, reason}")
    script = _javascript(checker, errors, rule, jsrules.VALIDATE, path)
    reject = rule.get("messageTemplate")
    if isinstance(reject, str) and not (template or rule.get("cel") or "javascript" in rule or rule.get("cue")):
        # A refusal of everything the policy applies to: its matchConditions do the checking.
        source = checker.collect(errors, _reject_source, reject, f"{path}.messageTemplate")
        if source is not None:
            rendered = checker.collect(errors, _compile_cel, source, f"{path}.messageTemplate")
    elif reject is not None:
        errors.append(PolicyError(f"{path}.messageTemplate", "only for a rule with neither template, cel nor "
                                  "javascript (use message, or return {valid, reason} from cel)"))
    if not (template or rule.get("cel") or "javascript" in rule or rule.get("cue") or reject is not None):
        errors.append(PolicyError(path, "no check: set template, cel or javascript (or messageTemplate alone, "
                                        "to refuse whatever the policy's matchConditions select)"))
    actions = _list(rule.get("validationActions")) or ["Deny"]
    if "Deny" in actions and "Warn" in actions:
        errors.append(PolicyError(f"{path}.validationActions", "Deny and Warn together make no sense: pick one"))
    for i, action in enumerate(actions):
        if action in actions[:i]:
            errors.append(PolicyError(f"{path}.validationActions[{i}]", f"duplicate action {action!r}"))
    if errors:
        raise PolicyErrors(errors)
    return ValidateRule(
        index=index, operations=normalise_operations(rule.get("targetOperations")),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), actions=frozenset(actions),
        message=str(rule.get("message") or message), allow_mode=allow_mode, rendered=rendered,
        cel=custom, javascript=script, refs=refs,
    ), source
