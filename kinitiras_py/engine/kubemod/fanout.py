"""A plaintext operation with ``select`` and/or ``valueTemplate`` rendered to one CEL program
giving what the operations need: the key parts of each selected value, and the rendered value.

``select`` fans the operation out: one operation per selected value, in document order, with
``#0``, ``#1``... in ``path`` replaced by the index (or key) each fan-out segment of the select
took for that value (the program gives the key parts; writing them into the path, escaped as
JSON pointer tokens, is :func:`operations`'s plain string work). A plain select (no ``[*]``,
union or filter) gives one operation when it selects something and none when it does not.

``valueTemplate`` is text with ``{{ CEL }}`` placeholders. In them ``target`` is the object,
``namespace`` the request's namespace, ``selectedItem`` the selected value (null without
``select``) and ``selectKeyParts`` the list of its key parts. A placeholder writes a string as
it is, other scalars as ``string()`` does, null as nothing and a list or map as JSON; the text
rendered is then read as YAML (``'8080'`` is a number, ``'"8080"'`` a string), as KubeMod reads
its patch values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kinitiras_py.api.overrides import PlaintextOverrider
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.kubemod import syntax
from kinitiras_py.engine.kubemod.syntax import Path, SelectError
from kinitiras_py.engine.kubemod.tocel import Compiler, Key
from kinitiras_py.engine.objects.patching import escape_pointer_token
from kinitiras_py.engine.rendering.environment import cel_string

PLACEHOLDER = re.compile(r"#(\d+)")
_OPEN, _CLOSE = "{{", "}}"


def template_parts(text: str, path: str) -> list[tuple[bool, str]]:
    """``text`` split into (is CEL, text) parts; raises PolicyError for an unclosed ``{{``."""
    parts: list[tuple[bool, str]] = []
    pos = 0
    while True:
        start = text.find(_OPEN, pos)
        if start < 0:
            if pos < len(text):
                parts.append((False, text[pos:]))
            return parts
        end = text.find(_CLOSE, start + 2)
        if end < 0:
            raise PolicyError(path, f"'{{{{' at {start} is never closed with '}}}}'")
        if start > pos:
            parts.append((False, text[pos:start]))
        expr = text[start + 2:end].strip()
        if not expr:
            raise PolicyError(path, f"the placeholder at {start} is empty")
        parts.append((True, expr))
        pos = end + 2


_STRING = r"[rR]?(?:'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"
"""A CEL string literal (single or double quotes, raw or not): a name inside one is text."""
_STRINGS = re.compile(_STRING)
_STRING_OR_NAMESPACE = re.compile(_STRING + r"|(?<![\w.])namespace(?!\w)")
NAMESPACE_VARIABLE = "kmNamespace"
"""``namespace`` is a reserved word in CEL: templates write it, the program binds this name."""


def _renamed(expr: str) -> str:
    return _STRING_OR_NAMESPACE.sub(lambda m: NAMESPACE_VARIABLE if m.group() == "namespace" else m.group(), expr)


def template_cel(text: str, path: str) -> str:
    """CEL of the rendered text of a value template (before it is read as YAML)."""
    pieces = [(_renamed(part) if _printed(part) else f"template.text(dyn({_renamed(part)}))") if is_cel
              else cel_string(part) for is_cel, part in template_parts(text, path)]
    return " + ".join(pieces) if pieces else '""'


_PRINTING = ("template.goText(", "template.goQuote(", "string(")


def _printed(expr: str) -> bool:
    """Whether ``expr`` is one call of a function that prints its argument (what a translated Go
    template writes): its string is written as it is, with no second conversion."""
    if not expr.startswith(_PRINTING) or not expr.endswith(")"):
        return False
    depth = 0
    bare = _STRINGS.sub('""', expr)
    for i, ch in enumerate(bare):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch == ")":
            return i == len(bare) - 1
    return False


def with_scope(body: str, item: str, keys: tuple[Key, ...]) -> str:
    """``body`` with the template names bound: target, namespace, selectedItem, selectKeyParts."""
    parts = ", ".join(k.expr for k in keys)
    return (f"cel.bind(target, object, cel.bind({NAMESPACE_VARIABLE}, request != null ? request.namespace : \"\", "
            f"cel.bind(selectedItem, {item}, cel.bind(selectKeyParts, dyn([{parts}]), {body}))))")


def check_path(path: str, depth: int, where: str) -> None:
    """Every ``#n`` in ``path`` must name one of the ``depth`` key parts of the select."""
    for m in PLACEHOLDER.finditer(path):
        n = int(m.group(1))
        if n >= depth:
            raise PolicyError(where, f"#{n} names a key part the select does not have (it has {depth}: "
                                     f"#0 to #{depth - 1})" if depth else
                                     f"#{n} names a key part, but the select has no [*], union or filter")


@dataclass(frozen=True)
class Rendered:
    """The CEL of a fanned-out operation and how to read its result."""

    source: str
    depth: int
    """Fan-out segments of the select: the result is nested one list per segment."""


def render(op: PlaintextOverrider, path: str) -> Rendered:
    """CEL giving, for each value ``op``'s select picks, ``{"k": [key parts], "v": value}``.

    ``v`` is there when the value comes from ``valueTemplate``; without ``select`` there is one
    entry with no key parts. :func:`operations` turns the result into the operations. Raises
    PolicyError naming the field at fault.
    """
    template = op.value_template
    target = op.path or ""

    def entry(item: str, keys: tuple[Key, ...]) -> str:
        parts = ", ".join(k.expr for k in keys)
        if template is None or op.op == "remove":
            return f'[{{"k": dyn([{parts}])}}]'
        text = with_scope(template_cel(template, f"{path}.valueTemplate"), item, keys)
        return f'[{{"k": dyn([{parts}]), "v": yaml.decode({text})}}]'

    select = op.select
    if select is None:
        return Rendered(entry("null", ()), 0)
    try:
        expr = syntax.parse(select)
        if not isinstance(expr, Path) or expr.root != "$":
            raise SelectError("a patch select must be a path from $ (the values it selects are what "
                              "the operation is applied for)")
        check_path(target, expr.fanout, f"{path}.path")
        return Rendered(Compiler().walk(expr, "list", entry), expr.fanout)
    except SelectError as e:
        raise PolicyError(f"{path}.select", f"invalid select: {e}") from None


def _token(key: JSON) -> str:
    if isinstance(key, str):
        return escape_pointer_token(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise ValueError(f"a select's key part must be an index or a key, got {key!r}")


def _order(key: JSON) -> tuple[int, int, str]:
    return (0, key, "") if isinstance(key, int) and not isinstance(key, bool) else (1, 0, str(key))


def _placed(path: str, keys: list[JSON]) -> str:
    return PLACEHOLDER.sub(lambda m: _token(keys[int(m.group(1))]), path)


def operations(result: JSON, op: Obj, depth: int) -> Patch:
    """The operations a fanned-out ``op`` makes from its program's ``result``, in order.

    The path's ``#n`` are replaced by the key parts (escaped as pointer tokens); the value is
    the rendered one, else ``op``'s own ``value``.
    """
    entries = result if isinstance(result, list) else [result]
    for _ in range(depth):
        entries = [e for level in entries if isinstance(level, list) for e in level]
    if not all(isinstance(entry, dict) for entry in entries):
        raise ValueError(f"the select program returned {entries!r}, not entries")
    # CEL iterates a map in an order of its own; sorted key parts make the patch the same every time.
    entries = sorted(entries, key=lambda e: [_order(k) for k in e.get("k") or []])
    ops: Patch = []
    target = str(op.get("path") or "")
    for entry in entries:
        keys = entry.get("k") or []
        path = _placed(target, keys) if op.get("select") else target
        made: Obj = {"op": op.get("op"), "path": path}
        if op.get("op") != "remove":
            made["value"] = entry["v"] if "v" in entry else op.get("value")
        if op.get("lenient"):
            made["lenient"] = True
        ops.append(made)
    return ops
