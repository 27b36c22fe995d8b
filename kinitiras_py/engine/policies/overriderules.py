"""An override rule checked and compiled: its template rendered (a sidecar template included), its
``cel``, ``javascript``, ``plaintext`` (with KubeMod selects) and ``origin`` overriders checked."""

from __future__ import annotations

import re
import sys
from typing import Any

from kinitiras_py.base.errors import CelEvalError, PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.evaluation import cel, celenv
from kinitiras_py.engine.kubemod import fanout
from kinitiras_py.engine.objects import patching, selectors
from kinitiras_py.engine.policies import boundary, shapes
from kinitiras_py.engine.policies.checker import (
    REF_SOURCES_WITH_PARAMS,
    Checker,
    check_reference,
    compile_cel,
    cue_rule,
    dict_of,
    javascript,
    list_of,
    user_cel,
)
from kinitiras_py.engine.policies.compiled import EMPTY, CompiledOverrideRule, normalise_operations
from kinitiras_py.engine.rendering import injecting, render
from kinitiras_py.engine.rendering.sidecar import PARAM_PREFIX
from kinitiras_py.engine.rules import jsrules, origin, sidecars

# The static result types a `cel` override may have (cel-expr-python type names).
_OVERRIDE_RESULTS = ("LIST", "DYN")


def override_rule(checker: Checker, rule: Obj, index: int, path: str) -> tuple[CompiledOverrideRule, str | None]:
    """One override rule checked and compiled, with the source its template rendered (or None)."""
    errors: list[PolicyError] = []
    over = dict_of(rule.get("overriders"))
    opath = f"{path}.overriders"
    cue = cue_rule(checker, errors, over.get("cue"), "override", f"{opath}.cue",
                   f"/spec/overrideRules/{index}/overriders/cueCel")
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
            rendered = checker.collect(errors, compile_cel, source, tpath)
            errors += _metadata_keys(template, tpath)
        ref = template.get("valueRef")
        if isinstance(ref, dict):
            check_reference(checker, ref, f"{tpath}.valueRef")
            if ref.get("from") in REF_SOURCES_WITH_PARAMS and not template.get("value"):
                refs["valueRef"] = ref
        checker.check_cel(errors, rendered, tpath, refs)
    custom = None
    if over.get("cel"):
        custom = checker.collect(errors, user_cel, over["cel"], f"{opath}.cel", _OVERRIDE_RESULTS,
                                 "an override must return a list of JSON patch operations")
        if custom is not None:
            constant = _constant_override(custom, f"{opath}.cel")
            errors += constant
            if not constant:  # a program reading no input was evaluated whole: nothing more to find
                checker.check_cel(errors, custom, f"{opath}.cel", refs)
    script = javascript(checker, errors, over, jsrules.MUTATE, opath)
    plaintext = list_of(over.get("plaintext"))
    errors += _check_plaintext(plaintext, f"{opath}.plaintext", checker.kinds)
    fanned: dict[int, tuple[cel.Program, int]] = {}
    for j, op in enumerate(plaintext):
        if isinstance(op, dict) and (op.get("select") is not None or op.get("valueTemplate") is not None):
            where = f"{opath}.plaintext[{j}]"
            made = checker.collect(errors, fanout.render, op, where)
            program = made and checker.collect(errors, compile_cel, made.source, where)
            if made is not None and program is not None:
                checker.check_cel(errors, program, where, refs)
                fanned[j] = (program, made.depth)
                checker.rendered_fields.append(
                    (f"/spec/overrideRules/{index}/overriders/plaintext/{j}/renderedCel", sys.intern(made.source)))
    entries = list_of(over.get("origin"))
    errors += origin.validate_origin(entries, f"{opath}.origin")
    if not (template or over.get("cel") or "javascript" in over or plaintext or entries or over.get("cue")):
        errors.append(PolicyError(opath, "no overrider: set template, cel, javascript, plaintext or origin"))
    inject = injecting.on_conflict(template)
    marker = None
    if inject is not None:
        errors += injecting.rule_problems(rule, opath)
        marker = checker.collect(errors, injecting.own_marker, template, f"{opath}.template")
    if errors:
        raise PolicyErrors(errors)
    operations = rule.get("targetOperations")
    return CompiledOverrideRule(
        index=index, operations=normalise_operations(operations or (["CREATE"] if inject else None)),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), rendered=rendered, cue=cue, cel=custom,
        javascript=script, plaintext=plaintext, origin=entries, refs=refs or EMPTY, sidecar=sidecar,
        fanout=fanned or EMPTY,
        last_applied=rule.get("patchLastApplied") is True, inject=inject, marker=marker,
    ), source


def _sidecar(checker: Checker, errors: list[PolicyError], template: Obj, path: str,
             refs: dict[str, Obj]) -> tuple[str | None, sidecars.SidecarRule | None]:
    """Check a sidecar template; render it when inline. Fetched valueRefs go into ``refs``."""
    problems = sidecars.check_template(template, path, checker.namespace is None)
    if problems:
        errors += problems
        return None, None
    rule = sidecars.rule_for(template, path, checker.ref, checker.name, checker.namespace)
    block = dict_of(template.get("sidecar"))
    config_map = dict_of(block.get("configMapRef"))
    errors += boundary.problems(checker.namespace, f"{path}.sidecar.configMapRef", "v1", "ConfigMap",
                                config_map.get("namespace"), config_map.get("name"))
    for name, ref in dict_of(block.get("valueRefs")).items():
        check_reference(checker, ref, f"{path}.sidecar.valueRefs[{name}]")
        if dict_of(ref).get("from") in REF_SOURCES_WITH_PARAMS:
            refs[PARAM_PREFIX + str(name)] = ref
    if rule.config_map is not None:
        return None, rule
    return checker.collect(errors, sidecars.render_inline, rule, str(block.get("template"))), rule


def _metadata_keys(template: Obj, path: str) -> list[PolicyError]:
    """Annotation and label keys must be qualified names, label values valid label values."""
    kind = template.get("type")
    if kind not in ("annotations", "labels"):
        return []
    value = dict_of(template.get("value"))
    # (key, where the key is written, label value or None, where the value is written)
    entries: list[tuple[Any, str, Any, str]] = []
    if value.get("stringMap") and template.get("operation") != "remove":
        entries = [(k, f"{path}.value.stringMap[{k}]", v, f"{path}.value.stringMap[{k}]")
                   for k, v in dict_of(value["stringMap"]).items()]
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


_INPUTS = re.compile(r"\b(?:" + "|".join(celenv.VARIABLES) + r")\b")
_POINTER = re.compile(r"(/([^~/]|~[01])*)*")
_PATCH_OPS = {"add": "value", "replace": "value", "test": "value", "remove": None, "move": "from", "copy": "from"}


def _constant_override(program: cel.Program, path: str) -> list[PolicyError]:
    """A `cel` overrider that names no input returns the same operations on every request:
    check them once, now, instead of failing every request."""
    if _INPUTS.search(program.source):
        return []
    try:
        ops = program.evaluate({}, remember=False)
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
        elif deep := patching.too_deep(op["path"].count("/"), op.get("value")):
            problems.append(f"[{i}] ({name}): {deep}")
    if not problems:
        return []
    return [PolicyError(path, "the expression reads no input and always returns invalid JSON patch operations: "
                              + "; ".join(problems))]


def _check_plaintext(ops: list[Any], path: str, kinds: shapes.Kinds) -> list[PolicyError]:
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
        elif isinstance(target, str) and target.startswith("/"):
            errors += _plaintext_target(op, target[1:].split("/"), f"{path}[{i}]", kinds)
    return errors


def _plaintext_target(op: Obj, tokens: list[str], path: str, kinds: shapes.Kinds) -> list[PolicyError]:
    """Where an operation that could never apply is refused: a path deeper than objects nest, a
    value that would nest too deep there, an index beyond any list's length (a remove of it is
    only a no-op)."""
    deep = patching.too_deep(len(tokens), None)
    if deep is not None:
        return [PolicyError(f"{path}.path", deep)]
    if op.get("op") not in ("add", "replace"):
        return []
    if deep := patching.too_deep(len(tokens), op.get("value")):
        return [PolicyError(f"{path}.value", deep)]
    beyond = None if op.get("lenient") is True else shapes.impossible_index(tokens, kinds)
    return [PolicyError(f"{path}.path", beyond)] if beyond else []
