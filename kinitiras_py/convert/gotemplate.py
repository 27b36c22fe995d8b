"""KubeMod's Go text/template values translated into our ``{{ CEL }}`` templates, exactly or not at all.

Translated (what has an exact CEL equivalent):

* fields: ``.Target.a.b`` → ``target["a"][?"b"].orValue(null)`` (a missing last key is Go's
  ``<no value>``; a missing key before it fails in both), ``.Namespace``, ``.SelectedItem``,
  ``.SelectKeyParts`` (``index .SelectKeyParts 1`` → ``selectKeyParts[1]``; in a patch value
  KubeMod first rewrites ``.#1`` to ``(index .SelectKeyParts 1)``, :func:`expand_key_parts`),
  ``.Target.syntheticRefs.namespace`` → ``namespaceObject`` and
  ``.Target.syntheticRefs.node`` → ``params.node`` (the converted policy's ``valueRefs.node``);
* string, number and boolean literals, parentheses, pipelines ``x | f a``;
* ``index x k...`` (a list index out of range fails, a missing map key is ``<no value>``, as in
  Go), ``quote x``, ``default d x``, ``regexReplaceAll re s repl`` (a pattern
  Python's ``re`` reads as RE2 does: no look-around, backreferences or possessive forms);
* printing, as Go prints (:func:`.kubemodlib.go_text`).

Everything else (``if``, ``range``, ``with``, variables, other functions) is reported, never
approximated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.engine.rendering.environment import cel_literal, cel_string

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
  | (?P<string>"(?:[^"\\]|\\.)*"|`[^`]*`)
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[|()])
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
_ROOTS = {"Target": "target", "Namespace": "namespace", "SelectedItem": "selectedItem",
          "SelectKeyParts": "selectKeyParts"}
_NOT_RE2 = re.compile(r"\(\?[=!<]|\(\?P=|\\[1-9]|[*+?}][+]")
"""Look-around, backreferences, possessive repetition: Python's re reads them, Go's regexp and RE2 refuse them."""
FUNCTIONS = ("index", "quote", "default", "regexReplaceAll")
_KEY_PART = re.compile(r"\.#(\d+)")
"""KubeMod's shorthand for a key part in a patch value: ``.#1``."""


_KEY_PART_EXPR = re.compile(r"selectKeyParts\[dyn\(\d+\)\]")


def expand_key_parts(text: str) -> str:
    """A patch value with KubeMod's ``.#N`` rewritten as KubeMod does before parsing it as a
    template: ``(index .SelectKeyParts N)``, wherever it occurs in the text."""
    return _KEY_PART.sub(r"(index .SelectKeyParts \1)", text)


class Untranslatable(KinitirasError, ValueError):
    """A template construct without an exact equivalent."""


@dataclass
class _Tokens:
    items: list[tuple[str, str]]
    pos: int = 0

    def peek(self) -> tuple[str, str]:
        return self.items[self.pos] if self.pos < len(self.items) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.pos += 1
        return token


def _tokens(text: str) -> _Tokens:
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "other"
        if kind == "space":
            continue
        if kind == "other":
            raise Untranslatable(f"{m.group()!r} in {{{{{text}}}}} has no translation")
        out.append((kind, m.group()))
    return _Tokens(out)


def _field(chain: str) -> str:
    if chain == ".":
        raise Untranslatable("'.' (the whole context) has no translation; name a field such as .Target")
    names = chain.split(".")[1:]
    root = _ROOTS.get(names[0])
    if root is None:
        raise Untranslatable(f".{names[0]} is not one of KubeMod's template fields ({', '.join(_ROOTS)})")
    rest = names[1:]
    if root == "target" and rest[:1] == ["syntheticRefs"]:
        if rest[1:2] == ["namespace"]:
            root, rest = "namespaceObject", rest[2:]
        elif rest[1:2] == ["node"]:
            root, rest = 'params[?"node"].orValue(null)', rest[2:]  # the policy's valueRefs.node
        else:
            raise Untranslatable("KubeMod's synthetic references are namespace and node")
    if not rest:
        return root
    expr = root + "".join(f"[{cel_string(n)}]" for n in rest[:-1])
    return f"{expr}[?{cel_string(rest[-1])}].orValue(null)"


def _literal(kind: str, text: str) -> str:
    if kind == "string":
        if text.startswith("`"):
            return cel_string(text[1:-1])
        try:
            decoded = json.loads(text)
        except ValueError:
            raise Untranslatable(f"the string {text} uses escapes JSON does not have") from None
        return cel_string(decoded)
    value = float(text) if any(c in text for c in ".eE") else int(text)
    return f"dyn({cel_literal(value)})"


def _operand(tokens: _Tokens) -> str:
    kind, text = tokens.take()
    if kind == "field":
        return _field(text)
    if kind in ("string", "number"):
        return _literal(kind, text)
    if kind == "word" and text in ("true", "false"):
        return f"dyn({text})"
    if kind == "word" and text == "nil":
        return "null"
    if kind == "punct" and text == "(":
        inner = _pipeline(tokens)
        if tokens.take() != ("punct", ")"):
            raise Untranslatable("unbalanced parentheses")
        return inner
    if kind == "word":
        raise Untranslatable(f"{text} cannot be an argument here; wrap the call in parentheses")
    raise Untranslatable(f"unexpected {text or 'end'!r}")


def _call(name: str, args: list[str]) -> str:
    if name == "index":
        if len(args) < 2:
            raise Untranslatable("index needs a value and at least one key")
        expr, keys = args[0], args[1:]
        if expr == _ROOTS["SelectKeyParts"]:  # a list: out of range fails, as in Go
            expr, keys = f"{expr}[{keys[0]}]", keys[1:]
        for key in keys:
            # Go: a list index out of range fails, a missing map key is <no value>.
            expr = (f"cel.bind(kmIndexed, dyn({expr}), type(kmIndexed) == list ? kmIndexed[{key}] "
                    f": kmIndexed[?{key}].orValue(null))")
        return expr
    if name == "quote":
        if len(args) != 1:
            raise Untranslatable("quote with other than one argument has no translation")
        quoted = f"string({args[0]})" if _KEY_PART_EXPR.fullmatch(args[0]) else f"dyn({args[0]})"
        return f"template.goQuote({quoted})"
    if name == "default":
        if len(args) != 2:
            raise Untranslatable("default needs a default and a value")
        v = "kmDefault"
        empty = (f"{v} == null || {v} == dyn('') || {v} == dyn(0) || {v} == dyn(false) "
                 f"|| (type({v}) in [list, map] && size({v}) == 0)")
        return f"cel.bind({v}, dyn({args[1]}), {empty} ? dyn({args[0]}) : {v})"
    if name == "regexReplaceAll":
        if len(args) != 3:
            raise Untranslatable("regexReplaceAll needs a pattern, a string and a replacement")
        pattern = args[0]
        if not pattern.startswith('"'):
            raise Untranslatable("regexReplaceAll's pattern must be a literal to be checked")
        if _NOT_RE2.search(pattern):
            raise Untranslatable(f"the pattern {pattern} uses syntax Go's regexp (RE2) refuses: look-around, "
                                 "backreferences or possessive repetition")
        return f"regexReplaceAll({args[0]}, {args[1]}, {args[2]})"
    raise Untranslatable(f"the function {name} has no translation (translated: {', '.join(FUNCTIONS)})")


def _command(tokens: _Tokens, piped: str | None) -> str:
    kind, text = tokens.peek()
    if kind == "word" and text not in ("true", "false", "nil"):
        tokens.take()
        args = []
        while tokens.peek()[0] not in ("end",) and tokens.peek() not in (("punct", "|"), ("punct", ")")):
            args.append(_operand(tokens))
        if piped is not None:
            args.append(piped)
        return _call(text, args)
    if piped is not None:
        raise Untranslatable("a pipeline must end in a function")
    return _operand(tokens)


def _pipeline(tokens: _Tokens) -> str:
    expr = _command(tokens, None)
    while tokens.peek() == ("punct", "|"):
        tokens.take()
        expr = _command(tokens, expr)
    return expr


def translate(text: str) -> str:
    """Our template for KubeMod's ``text``; raises Untranslatable saying what has no equivalent."""
    out: list[str] = []
    pos = 0
    for m in _ACTION.finditer(text):
        before = text[pos:m.start()]
        if m.group(1):
            before = before.rstrip()
        out.append(before)
        body = m.group(2).strip()
        if body.startswith("/*"):
            raise Untranslatable("template comments have no translation")
        head = body.split(None, 1)[0] if body else ""
        if head in ("if", "else", "end", "range", "with", "define", "template", "block", "break", "continue") \
                or head.startswith("$"):
            raise Untranslatable(f"{{{{{body}}}}}: {head} has no translation (only values are translated)")
        tokens = _tokens(body)
        expr = _pipeline(tokens)
        if tokens.peek()[0] != "end":
            raise Untranslatable(f"{{{{{body}}}}}: unexpected {tokens.peek()[1]!r}")
        # A key part is an index or a key, printed by Go as by CEL's string(): no call to convert it
        # (in a select two levels deep the conversions would weigh on its cost).
        printed = f"string({expr})" if _KEY_PART_EXPR.fullmatch(expr) else f"template.goText(dyn({expr}))"
        out.append("{{ " + printed + " }}")
        pos = m.end()
        if m.group(3):
            rest = text[pos:]
            pos += len(rest) - len(rest.lstrip())
    tail = text[pos:]
    if "{{" in tail:
        raise Untranslatable("a '{{' is never closed")
    out.append(tail)
    return "".join(out)


def is_template(text: str) -> bool:
    """Whether KubeMod would run ``text`` as a template (it contains ``{{``)."""
    return "{{" in text
