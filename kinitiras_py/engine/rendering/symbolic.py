"""Render a sidecar's jinja2 template once for every pod: per-pod values become placeholders.

The template is rendered when the policy (or its ConfigMap) is read, not per request. What
differs from pod to pod (labels, annotations, the object, namespace, name, ``appPorts``,
``valueRefs``) is a :class:`PerPod` value: printing one writes a marker into the output, which
the caller later turns into a CEL string expression. Anything that would make the template's
*shape* depend on a pod (a test, a loop, a comparison, a filter that changes the text) raises
:class:`PerPodUse`, so the rendered YAML is the same for every pod but for the markers.
Constants (``values``) are ordinary values: control flow on them is fine.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.engine.rendering.environment import cel_string

MARKER_PREFIX = "kinitirasPodValue"
MARKER = re.compile(MARKER_PREFIX + r"(\d+)x")
_MARKER_ANY_CASE = re.compile(MARKER_PREFIX, re.IGNORECASE)
MAX_OUTPUT = 1 << 20
"""Most characters a rendered template may have (1 MiB: a pod object is at most 3 MiB)."""
_PASS_THROUGH = ("string",)


class PerPodUse(KinitirasError):
    """The template makes its output depend on a per-pod value in a way CEL text cannot follow."""


@dataclass
class Slot:
    """One printed per-pod value: the CEL expression giving it (null when absent) and what it is."""

    expr: str
    what: str


@dataclass
class Scope:
    """The slots printed so far, in order; equal values share one slot."""

    slots: list[Slot] = field(default_factory=list)

    def marker(self, value: PerPod) -> str:
        """The marker standing for ``value`` in the output."""
        if not value._printable:
            raise PerPodUse(f"{value._what} is a map: print one entry of it, e.g. {value._what}[\"key\"]")
        expr = f"({value._expr}).orValue({cel_string(value._default) if value._default is not None else 'dyn(null)'})"
        for index, slot in enumerate(self.slots):
            if slot.expr == expr:
                return f"{MARKER_PREFIX}{index}x"
        self.slots.append(Slot(expr, value._what))
        return f"{MARKER_PREFIX}{len(self.slots) - 1}x"


class PerPod:
    """A value that differs from pod to pod. ``expr`` is an optional-typed CEL expression."""

    __slots__ = ("_default", "_expr", "_nested", "_printable", "_scope", "_what")

    def __init__(self, scope: Scope, expr: str, what: str, *, nested: bool = True, printable: bool = True,
                 default: str | None = None) -> None:
        self._scope, self._expr, self._what = scope, expr, what
        self._nested, self._printable, self._default = nested, printable, default

    def _child(self, key: object) -> PerPod:
        if not self._nested or isinstance(key, bool) or not isinstance(key, str | int):
            raise PerPodUse(f"reading [{key!r}] of {self._what}")
        token = f"[?{key}]" if isinstance(key, int) else f"[?{cel_string(key)}]"
        what = f"{self._what}[{key!r}]" if isinstance(key, int) or not key.isidentifier() else f"{self._what}.{key}"
        if self._what in ("labels", "annotations"):
            what = f"{self._what[:-1]} {key!r}"
        return PerPod(self._scope, self._expr + token, what)

    def with_default(self, default: object) -> PerPod:
        """This value, or ``default`` (a constant) when the pod does not have it."""
        if isinstance(default, PerPod):
            raise PerPodUse(f"the default of {self._what} is {default._what}, itself a per-pod value")
        return PerPod(self._scope, self._expr, self._what, nested=False, printable=self._printable,
                      default="" if default is None else str(default))

    def __getattr__(self, name: str) -> PerPod:
        if name.startswith(("_", "jinja")):
            raise AttributeError(name)
        return self._child(name)

    def __getitem__(self, key: object) -> PerPod:
        return self._child(key)

    def __str__(self) -> str:
        return self._scope.marker(self)

    def _refuse(self, action: str) -> PerPodUse:
        return PerPodUse(f"{action} {self._what}")

    def __bool__(self) -> bool:
        raise self._refuse("testing")

    def __iter__(self) -> Any:
        raise self._refuse("looping over")

    def __len__(self) -> int:
        raise self._refuse("taking the length of")

    def __contains__(self, item: object) -> bool:
        raise self._refuse("testing membership in")

    def __call__(self, *args: object, **kwargs: object) -> Any:
        raise self._refuse("calling")

    def __eq__(self, other: object) -> bool:
        raise self._refuse("comparing")

    def __ne__(self, other: object) -> bool:
        raise self._refuse("comparing")

    def __lt__(self, other: object) -> bool:
        raise self._refuse("comparing")

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = object.__hash__

    def __add__(self, other: object) -> Any:
        raise self._refuse("adding to (join text with ~ instead)")

    __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __add__

    def __int__(self) -> int:
        raise self._refuse("converting to a number")

    __float__ = __index__ = __int__


def _guard(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A filter or test that refuses per-pod arguments, except the few that keep text exact."""
    # Filters marked pass_context/pass_eval_context/pass_environment get that first.
    first = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        per_pod = [a for a in (*args, *kwargs.values()) if isinstance(a, PerPod)]
        if not per_pod:
            return fn(*args, **kwargs)
        value, rest = per_pod[0], args[first + 1:]
        if len(args) <= first or args[first] is not value:
            raise PerPodUse(f"passing {value._what} to {name!r}")
        if name in ("default", "d"):
            return value.with_default(rest[0] if rest else kwargs.get("default_value", ""))
        if name in _PASS_THROUGH:
            return value
        if name == "tojson":
            return f'"{value}"'
        raise PerPodUse(f"applying {name!r} to {value._what}")

    return guarded


@functools.cache
def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters = {name: _guard(name, fn) for name, fn in env.filters.items()}
    env.tests = {name: _guard(f"is {name}", cast(Callable[..., Any], fn)) for name, fn in env.tests.items()}
    return env


def render(text: str, context: dict[str, Any]) -> str:
    """``text`` rendered with ``context``; PerPodUse, or ValueError with a one-line reason."""
    if _MARKER_ANY_CASE.search(text):
        raise ValueError(f"the template may not contain the text {MARKER_PREFIX!r} (reserved)")
    try:
        template = _environment().from_string(text)
        out = template.render(context)
    except PerPodUse:
        raise
    except jinja2.TemplateSyntaxError as e:
        raise ValueError(f"line {e.lineno}: {e.message}") from None
    except jinja2.TemplateError as e:
        raise ValueError(str(e)) from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError, RecursionError) as e:
        raise ValueError(f"rendering failed: {type(e).__name__}: {e}") from None
    if len(out) > MAX_OUTPUT:
        raise ValueError(f"the rendered template has {len(out)} characters; at most {MAX_OUTPUT} are allowed")
    exact = len(MARKER.findall(out))
    if len(_MARKER_ANY_CASE.findall(out)) != exact:
        raise PerPodUse("changing the text of a per-pod value")
    return out
