"""JavaScript rules with js-admissions-controller's contract: ``jsa_mutate`` and ``jsa_validate``.

A rule's ``javascript`` field holds a script defining the function its rule calls: an overrider
calls ``jsa_mutate``, a validate rule ``jsa_validate``. Parameters are bound by name, in any
order: ``op`` (the operation, a plain string such as ``"CREATE"``), ``obj`` (the object),
``old`` (the object before an UPDATE, else null), ``sync`` (true: calls never overlap; with it the
function may change the state) and ``state`` (what the watch hooks keep, :mod:`.jshooks`).

Either function may return ``{Allowed, Message, Result}``. ``Allowed`` exactly ``false``
denies with ``Message``; any other return allows. For ``jsa_mutate``, a ``Result`` replaces the
object: the RFC 6902 operations turning the working object into it are applied through the
rule's draft (:mod:`..objects.patchlog`), so the response patch is still built from applied operations.
A rule with a ``marker`` then writes js-admissions' annotation naming the rules that returned a
``Result`` in this request (:class:`Marks`).

The script is loaded once per policy version (:func:`compile_javascript`); what it returns is
checked on every call, and anything unexpected is a rule error under the rule's failurePolicy.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kinitiras_py.api import javascript as model
from kinitiras_py.base.errors import PolicyError, RuleDenied
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.evaluation import jsruntime
from kinitiras_py.engine.objects import patching, patchlog, selectors
from kinitiras_py.engine.rules import jshooks

MUTATE = "jsa_mutate"
VALIDATE = "jsa_validate"
HOOKS = tuple(jshooks.PARAMETERS)
"""js-admissions-controller's watch hooks (:mod:`.jshooks`)."""
PARAMETERS = ("op", "obj", "old", "sync", "state")
_NAME = re.compile(r"^[A-Za-z_$][\w$]*$")
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_HEAD = re.compile(r"^\s*(?:async\s+)?(?:function\b\s*\*?\s*[\w$]*\s*\(([^)]*)\)|\(([^)]*)\)\s*=>"
                   r"|([\w$]+)\s*=>|[\w$]+\s*\(([^)]*)\)\s*\{)", re.S)
_SAFE_INTEGER = 2 ** 53
MAX_DEPTH = 200
"""How deep a Result may nest: as deep as the webhook lets a request's object be."""
_INT64 = 2 ** 63
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("javascript_deadline", default=float("inf"))


@dataclass(frozen=True)
class JsProgram:
    """A loaded script and how to call its function."""

    script: jsruntime.Script
    function: str
    parameters: tuple[str, ...]
    marker: tuple[str, str] | None = None
    """(annotation, this rule's name in it) for js-admissions' marker."""
    hooks: jshooks.Hooks | None = None
    """The watch hooks and state; None when the script defines no hook and takes no state."""

    @property
    def source(self) -> str:
        """The script as written in the policy."""
        return self.script.source


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[None]:
    """Scripts called inside this block (also from threads started with the context copied, as
    ``asyncio.to_thread`` does) share ``seconds`` from now: each gets what is left, at most its
    own limit, so JavaScript rules together never outlast the webhook's deadline."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _admission_until() -> float | None:
    """When loading a script must be given up on: the deadline of the request admitting its policy
    (:func:`request_deadline`), or None without one (offline: the runtime's own bound)."""
    until = _deadline.get()
    return None if until == float("inf") else until


def parameters_of(text: str, function: str, allowed: tuple[str, ...] = PARAMETERS) -> tuple[str, ...]:
    """The parameter names in a function's source text; ValueError when they are not plain
    names among ``allowed`` (a default, a destructuring pattern, an unknown name)."""
    head = _HEAD.match(_COMMENTS.sub(" ", text))
    if head is None:
        raise ValueError(f"{function} must be a function with its parameters in parentheses")
    listed = next((group for group in head.groups() if group is not None), "")
    names = tuple(name.strip() for name in listed.split(",") if name.strip())
    for name in names:
        if not _NAME.match(name):
            raise ValueError(f"{function}: parameter {name!r}: parameters are bound by name, so write plain "
                             f"names among {', '.join(allowed)} (no defaults, patterns or rest)")
        if name not in allowed:
            raise ValueError(f"{function}: parameter {name!r} is not one it is given; its parameters are "
                             f"{', '.join(allowed)}, in any order")
        if names.count(name) > 1:
            raise ValueError(f"{function}: parameter {name!r} is named twice")
    return names


LIMITS = ("timeoutMs", "memoryLimitMiB", "stateLimitKiB")
"""The fields of a script's limits."""


def compile_javascript(spec: model.JavaScript | None, function: str, path: str, owner: str = "",
                       load: bool = True) -> JsProgram | None:
    """Load the ``javascript`` field at ``path`` of policy ``owner`` for calling ``function``;
    with ``load`` False (a field the model refused: the script would run under a limit, or
    without a marker, not written) it is only checked, and None returned. PolicyErrors name the
    field (a syntax error, its line). A script without watch hooks that takes ``state`` has it
    built (jsa_init) at once; one with watch hooks moves to a watch thread and waits for
    :meth:`.jshooks.Hooks.start`. Inside :func:`request_deadline` the load gives up at that
    deadline."""
    if spec is None or not spec.source or not spec.source.strip():
        raise PolicyError(f"{path}.source", f"required: a script defining {function}")
    marker = _marker(spec.marker, function, f"{path}.marker")
    if not load:
        return None
    timeout_ms = model.DEFAULT_TIMEOUT_MS if spec.timeout_ms is None else spec.timeout_ms
    memory_mib = model.DEFAULT_MEMORY_MIB if spec.memory_limit_mi_b is None else spec.memory_limit_mi_b
    state_kib = model.DEFAULT_STATE_KIB if spec.state_limit_ki_b is None else spec.state_limit_ki_b
    script = jsruntime.Script(spec.source, timeout_ms, memory_mib, name=f"{owner}: {path}" if owner else path)
    other = VALIDATE if function == MUTATE else MUTATE
    try:
        script.load((function, other, *HOOKS), _admission_until())
    except jsruntime.JsLoadError as e:
        where = f"line {e.line}: " if e.line else ""
        raise PolicyError(f"{path}.source", f"{where}{e.reason}") from None
    except jsruntime.JsError as e:
        raise PolicyError(f"{path}.source", f"the script cannot be loaded: {e.reason}") from None
    if script.types.get(function) != "function":
        found = script.types.get(function, "undefined")
        hint = f" ({other} runs in a {'validate rule' if other == VALIDATE else 'javascript overrider'})" \
            if script.types.get(other) == "function" else ""
        raise PolicyError(f"{path}.source", f"the script must define a function {function}; it is {found}{hint}")
    # The other function may be defined: a converted script is carried whole into both policies.
    try:
        names = parameters_of(script.texts.get(function, ""), function)
        hooks = {hook: parameters_of(script.texts.get(hook, ""), hook, allowed)
                 for hook, allowed in jshooks.PARAMETERS.items() if script.types.get(hook) == "function"}
    except ValueError as e:
        raise PolicyError(f"{path}.source", str(e)) from None
    kept = None
    if hooks or "state" in names:
        kept = jshooks.Hooks(script, hooks, state_kib * 1024)
        if kept.watches:
            script.watch()
        else:
            kept.start()
    return JsProgram(script, function, names, marker, kept)


def _marker(spec: model.JavaScriptMarker | None, function: str, path: str) -> tuple[str, str] | None:
    if spec is None:
        return None
    if function != MUTATE:
        raise PolicyError(path, "only an overrider's script changes the object, so only it can mark it")
    if not spec.name or "," in spec.name:
        raise PolicyError(f"{path}.name", "required: this rule's name in the annotation, without commas")
    problem = selectors.qualified_name_problem(spec.annotation)
    if problem:
        raise PolicyError(f"{path}.annotation", f"must be an annotation key: {problem}")
    return spec.annotation, spec.name


def _call(program: JsProgram, variables: Mapping[str, Any], obj: JSON) -> JSON:
    request = variables.get("request")
    inputs: dict[str, JSON] = {
        "op": str(request.get("operation") or "") if isinstance(request, dict) else "",
        "obj": obj, "old": variables.get("oldObject"), "sync": True, "state": None,  # put in on the JS thread
    }
    left = _deadline.get() - time.monotonic()
    if left <= 0:
        raise jsruntime.JsError("no time is left for the script within the request's deadline")
    binding = program.hooks.binding(program.parameters) if program.hooks is not None else None
    return program.script.call(program.function, [inputs[name] for name in program.parameters], left, binding)


def _denial(result: JSON, function: str) -> str | None:
    """The message when ``result`` denies (``Allowed`` is exactly false), else None."""
    if isinstance(result, dict) and result.get("Allowed") is False:
        message = result.get("Message")
        if message is None or message == "":
            return f"denied by {function}"
        return message if isinstance(message, str) else str(message)
    return None


def mutate_ops(program: JsProgram, working: Obj, variables: Mapping[str, Any]) -> Patch | None:
    """Call ``jsa_mutate`` on ``working``: the RFC 6902 operations turning it into the returned
    ``Result`` (None without one: the marker is written only when there is one). RuleDenied when
    it returns ``Allowed: false``; JsError when it fails or its Result is not the same kind of
    object."""
    result = _call(program, variables, working)
    message = _denial(result, program.function)
    if message is not None:
        raise RuleDenied(message)
    new = result.get("Result") if isinstance(result, dict) else None
    if new is None:
        return None
    if not isinstance(new, dict) or not isinstance(new.get("apiVersion"), str) or not isinstance(new.get("kind"), str):
        raise jsruntime.JsError(f"{program.function} returned a Result that is not an object with apiVersion and "
                                "kind")
    problem = _shape_problem(new)
    if problem:
        raise jsruntime.JsError(f"{program.function} returned a Result that {problem}")
    for key in ("apiVersion", "kind"):
        if key in working and new[key] != working[key]:
            raise jsruntime.JsError(f"{program.function} returned a Result whose {key} is {new[key]!r}, not "
                                    f"{working[key]!r}: a mutation cannot change it")
    try:
        return patchlog.difference(working, _reconciled(working, new))
    except RecursionError:
        raise jsruntime.JsError(f"{program.function} returned a Result nested too deeply") from None


class Marks:
    """The names js-admissions' marker annotations hold in one request, by annotation: a rule that
    returned a Result adds its name (:meth:`ops`); it stays only if the rule succeeds (:meth:`settle`)."""

    def __init__(self) -> None:
        self._names: dict[str, list[str]] = {}
        self._pending: tuple[str, str] | None = None

    def ops(self, marker: tuple[str, str], working: Obj) -> Patch:
        """The operation setting ``marker``'s annotation on ``working`` to the names so far and this one."""
        annotation, name = marker
        self._pending = marker
        value = ",".join([*self._names.get(annotation, []), name])
        meta = working.get("metadata")
        if not isinstance(meta, dict):
            return [{"op": "add", "path": "/metadata", "value": {"annotations": {annotation: value}}}]
        if not isinstance(meta.get("annotations"), dict):
            return [{"op": "add", "path": "/metadata/annotations", "value": {annotation: value}}]
        return [{"op": "add", "path": f"/metadata/annotations/{patching.escape_pointer_token(annotation)}",
                 "value": value}]

    def settle(self, kept: bool) -> None:
        """The rule that last asked for :meth:`ops` succeeded (``kept``) or was not applied."""
        if kept and self._pending is not None:
            self._names.setdefault(self._pending[0], []).append(self._pending[1])
        self._pending = None


def validate_result(program: JsProgram, obj: Obj, variables: Mapping[str, Any]) -> tuple[bool, str]:
    """Call ``jsa_validate``: (False, message) when it returns ``Allowed: false``, else (True, "")."""
    message = _denial(_call(program, variables, obj), program.function)
    return (True, "") if message is None else (False, message)


def _reconciled(before: JSON, after: JSON) -> JSON:
    """``after`` with every part equal to ``before``'s as JSON numbers compare (``1`` and ``1.0``;
    integers past 2^53, which a script only sees rounded) replaced by ``before``'s own value, so
    what the script did not change is not reported as changed."""
    if before is after:
        return after
    if type(before) is dict and type(after) is dict:
        out = {key: _reconciled(before[key], value) if key in before else value for key, value in after.items()}
        same = len(out) == len(before) and all(key in before and out[key] is before[key] for key in out)
        return before if same else out
    if type(before) is list and type(after) is list:
        items = [_reconciled(before[i], value) if i < len(before) else value for i, value in enumerate(after)]
        same = len(items) == len(before) and all(x is y for x, y in zip(items, before, strict=True))
        return before if same else items
    if _number(before) and _number(after) and _rounded_alike(before, after):
        return before
    return before if patchlog.same(before, after) else after


def _shape_problem(value: JSON) -> str | None:
    """What makes ``value`` unfit for an object the API server keeps: nesting beyond
    :data:`MAX_DEPTH`, or an integer beyond 64 bits (JavaScript prints 1e20 as digits)."""
    pending: list[tuple[JSON, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            return f"is nested deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)
        elif isinstance(node, int) and not isinstance(node, bool) and not -_INT64 <= node < _INT64:
            return f"holds the integer {node}, beyond 64 bits"
    return None


def _number(value: JSON) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _rounded_alike(before: float, after: float) -> bool:
    """Equal numbers, or an integer beyond 2^53 and what a script sees of it (its nearest double)."""
    if before == after:
        return True
    try:
        return abs(before) > _SAFE_INTEGER and float(before) == float(after)
    except OverflowError:
        return False
