"""The CUE subset kinitiras rules use, read into a small syntax tree.

Anything outside the subset stops the reader with :class:`Unsupported`, naming the construct and
its line and column in the ``cue`` text, so a program is either read whole or refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kinitiras_py.engine.cue.lexer import KEYWORDS, MAX_DEPTH, Tok, tokens
from kinitiras_py.engine.cue.tree import (
    Binary,
    Bottom,
    Call,
    Clause,
    Comprehension,
    Decl,
    Disjunction,
    Embed,
    Field,
    File,
    Index,
    Interp,
    Let,
    ListLit,
    Lit,
    Node,
    Pos,
    Ref,
    Sel,
    Struct,
    Top,
    Unary,
    Unsupported,
)

T = TypeVar("T")

IMPORTS = frozenset({"strings", "strconv", "regexp", "list", "math"})
"""The packages a program may import (only some of their functions: :mod:`.operators`)."""

_BINARY = [("|",), ("&",), ("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "=~", "!~"), ("+", "-"),
           ("*", "/")]


class Parser:
    """Recursive descent over the tokens of one file (or of one interpolation)."""

    def __init__(self, toks: list[Tok], depth: int = 0) -> None:
        self.toks = toks
        self.i = 0
        self.depth = depth * 4

    def peek(self, ahead: int = 0) -> Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def take(self) -> Tok:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, text: str) -> Tok:
        tok = self.take()
        if tok.text != text or tok.kind == "string":
            raise Unsupported(tok.pos, f"expected {text!r}, found {tok.text or 'end of text'!r}")
        return tok

    def whole_expr(self) -> Node:
        node = self.expr()
        if self.peek().kind != "eof":
            raise Unsupported(self.peek().pos, f"unexpected {self.peek().text!r}")
        return node

    def file(self) -> File:
        """The top level: imports, then declarations up to the end of the text."""
        imports: list[str] = []
        while self.peek().kind == "ident" and self.peek().text in ("package", "import"):
            tok = self.take()
            if tok.text == "package":
                raise Unsupported(tok.pos, "`package` is not supported")
            grouped = self.peek().text == "(" and self.peek().kind == "op"
            if grouped:
                self.take()
            while True:
                while grouped and self.peek().text == "," and self.peek().kind == "op":
                    self.take()
                if grouped and self.peek().text == ")":
                    self.take()
                    break
                imports.append(self._import())
                if not grouped:
                    break
            while self.peek().text == "," and self.peek().kind == "op":
                self.take()
        return File((1, 1), self.decls("eof"), tuple(imports))

    def _import(self) -> str:
        tok = self.take()
        if tok.kind != "string":
            raise Unsupported(tok.pos, "expected an import path (aliases are not supported)")
        path = "".join(p for p in tok.parts if isinstance(p, str))
        if path not in IMPORTS:
            raise Unsupported(tok.pos, f"package {path!r} is not supported (only {', '.join(sorted(IMPORTS))})")
        return path

    def decls(self, end: str) -> tuple[Decl, ...]:
        out: list[Decl] = []
        while True:
            while self.peek().text == "," and self.peek().kind == "op":
                self.take()
            tok = self.peek()
            if tok.kind == "eof" or (tok.kind == "op" and tok.text == end):
                return tuple(out)
            out.append(self.decl())
            nxt = self.peek()
            if not (nxt.kind == "eof" or nxt.text in (",", end)):
                raise Unsupported(nxt.pos, f"unexpected {nxt.text!r}: declarations are separated by "
                                           "commas or new lines")

    def decl(self) -> Decl:
        tok = self.peek()
        if tok.kind == "ident" and tok.text in ("package", "import"):
            raise Unsupported(tok.pos, f"`{tok.text}` is not supported")
        if tok.kind == "ident" and tok.text == "let" and self.peek(1).kind == "ident":
            self.take()
            name = self.take().text
            self.expect("=")
            return Let(tok.pos, name, self.expr())
        if tok.kind == "ident" and tok.text in ("if", "for"):
            return self.comprehension()
        label = self.label()
        if label is not None:
            if self.peek().text in ("?", "!") and self.peek().kind == "op":
                raise Unsupported(self.peek().pos, "optional and required field markers are not supported")
            self.expect(":")
            if self.peek().kind in ("ident", "string") and self.peek(1).text == ":":
                inner = self.peek().pos
                return Field(tok.pos, label, Struct(inner, (self.nested(self.decl),)))
            value = self.expr()
            attrs = []
            while self.peek().kind == "attr":
                attrs.append(self.take().text)
            return Field(tok.pos, label, value, tuple(attrs))
        if tok.kind == "attr":
            raise Unsupported(tok.pos, "declaration attributes are not supported")
        return Embed(tok.pos, self.expr())

    def label(self) -> str | None:
        tok, nxt = self.peek(), self.peek(1)
        if nxt.kind != "op" or nxt.text not in (":", "?", "!") or (nxt.text == "!" and self.peek(2).text != ":"):
            if tok.kind == "op" and tok.text in ("[", "(") and self._pattern_label():
                raise Unsupported(tok.pos, "pattern and dynamic labels are not supported")
            return None
        if tok.kind == "ident":
            self.take()
            return tok.text
        if tok.kind == "string":
            if any(not isinstance(p, str) for p in tok.parts):
                raise Unsupported(tok.pos, "interpolated labels are not supported")
            self.take()
            return "".join(p for p in tok.parts if isinstance(p, str))
        return None

    def _pattern_label(self) -> bool:
        depth, j = 0, 0
        while True:
            tok = self.peek(j)
            if tok.kind == "eof":
                return False
            if tok.kind == "op" and tok.text in ("[", "("):
                depth += 1
            elif tok.kind == "op" and tok.text in ("]", ")"):
                depth -= 1
                if depth == 0:
                    return self.peek(j + 1).text == ":"
            j += 1

    def comprehension(self) -> Comprehension:
        start = self.peek().pos
        clauses: list[Clause] = []
        while self.peek().kind == "ident" and self.peek().text in ("if", "for", "let"):
            tok = self.take()
            if tok.text == "let":
                raise Unsupported(tok.pos, "`let` clauses inside comprehensions are not supported")
            if tok.text == "if":
                clauses.append(Clause(tok.pos, "if", self.expr()))
                continue
            first = self.take()
            if first.kind != "ident":
                raise Unsupported(first.pos, "expected a variable name after `for`")
            key, value = None, first.text
            if self.peek().text == ",":
                self.take()
                second = self.take()
                if second.kind != "ident":
                    raise Unsupported(second.pos, "expected a variable name after `for k,`")
                key, value = value, second.text
            self.expect("in")
            clauses.append(Clause(tok.pos, "for", self.expr(), key, value))
        body = self.primary()
        if not isinstance(body, Struct):
            raise Unsupported(body.pos, "a comprehension's body must be a struct `{...}`")
        return Comprehension(start, tuple(clauses), body)

    def nested(self, read: Callable[[], T]) -> T:
        """``read()`` one level deeper; refused past :data:`MAX_DEPTH` (no recursion without end)."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise Unsupported(self.peek().pos, f"expressions nested more than {MAX_DEPTH} deep")
            return read()
        finally:
            self.depth -= 1

    def expr(self) -> Node:
        """One expression, disjunctions included."""
        return self.nested(lambda: self._level(0))

    def _level(self, level: int) -> Node:
        if level == len(_BINARY):
            return self.unary()
        left = self._level(level + 1)
        ops = _BINARY[level]
        if ops == ("|",):
            return self._disjunction(left)
        while self.peek().kind == "op" and self.peek().text in ops:
            tok = self.take()
            left = Binary(tok.pos, tok.text, left, self._level(level + 1))
        return left

    def _disjunction(self, first: Node) -> Node:
        if not (self.peek().kind == "op" and self.peek().text == "|") and not isinstance(first, Unary):
            return first
        options = [first]
        while self.peek().kind == "op" and self.peek().text == "|":
            self.take()
            options.append(self._level(1))
        marked = [i for i, o in enumerate(options) if isinstance(o, Unary) and o.op == "*"]
        if len(marked) > 1:
            raise Unsupported(options[marked[1]].pos, "more than one default in a disjunction")
        plain = tuple(o.operand if isinstance(o, Unary) and o.op == "*" else o for o in options)
        if len(plain) == 1 and not marked:
            return first
        return Disjunction(first.pos, plain, marked[0] if marked else None)

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("!", "-", "*", "+"):
            self.take()
            return Unary(tok.pos, tok.text, self.nested(self.unary))
        if tok.kind == "op" and tok.text in ("<", "<=", ">", ">=", "!=", "=~", "!~"):
            raise Unsupported(tok.pos, f"unary comparison `{tok.text}` (a bound constraint) is not supported")
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text == ".":
                self.take()
                name = self.take()
                if name.kind == "string" and all(isinstance(p, str) for p in name.parts):
                    node = Sel(name.pos, node, "".join(p for p in name.parts if isinstance(p, str)))
                elif name.kind == "ident":
                    node = Sel(name.pos, node, name.text)
                else:
                    raise Unsupported(name.pos, "expected a field name after `.`")
            elif tok.kind == "op" and tok.text == "[":
                self.take()
                if self.peek().text == ":":
                    raise Unsupported(tok.pos, "slices are not supported")
                index = self.expr()
                if self.peek().text == ":":
                    raise Unsupported(tok.pos, "slices are not supported")
                self.expect("]")
                node = Index(tok.pos, node, index)
            elif tok.kind == "op" and tok.text == "(":
                if isinstance(node, Sel) and isinstance(node.base, Ref):
                    callee = f"{node.base.name}.{node.name}"
                elif isinstance(node, Ref):
                    callee = node.name
                else:
                    raise Unsupported(node.pos, "only `len(...)` and package functions can be called")
                self.take()
                args: list[Node] = []
                while self.peek().text != ")":
                    args.append(self.expr())
                    if self.peek().text == ",":
                        self.take()
                self.expect(")")
                node = Call(node.pos, callee, tuple(args))
            else:
                return node

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "int":
            return Lit(tok.pos, int(tok.text))
        if tok.kind == "float":
            return Lit(tok.pos, float(tok.text))
        if tok.kind == "string":
            if all(isinstance(p, str) for p in tok.parts):
                return Lit(tok.pos, "".join(p for p in tok.parts if isinstance(p, str)))
            return Interp(tok.pos, tok.parts)
        if tok.kind == "bottom":
            return Bottom(tok.pos)
        if tok.kind == "ident":
            if tok.text in KEYWORDS:
                return Lit(tok.pos, KEYWORDS[tok.text])
            if tok.text == "_":
                return Top(tok.pos)
            if tok.text in ("if", "for", "let", "import", "package", "in"):
                raise Unsupported(tok.pos, f"`{tok.text}` cannot start an expression here")
            return Ref(tok.pos, tok.text)
        if tok.kind == "op" and tok.text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if tok.kind == "op" and tok.text == "{":
            decls = self.decls("}")
            self.expect("}")
            return Struct(tok.pos, decls)
        if tok.kind == "op" and tok.text == "[":
            return self._list(tok.pos)
        what = tok.text or "end of text"
        raise Unsupported(tok.pos, f"unexpected {what!r}")

    def _list(self, pos: Pos) -> ListLit:
        elems: list[Node | Comprehension] = []
        while True:
            while self.peek().text == "," and self.peek().kind == "op":
                self.take()
            tok = self.peek()
            if tok.kind == "op" and tok.text == "]":
                self.take()
                return ListLit(pos, tuple(elems))
            if tok.kind == "op" and tok.text == "...":
                raise Unsupported(tok.pos, "open lists `...` are not supported")
            if tok.kind == "ident" and tok.text in ("if", "for"):
                elems.append(self.comprehension())
            else:
                elems.append(self.expr())
            if self.peek().text not in (",", "]"):
                raise Unsupported(self.peek().pos, f"unexpected {self.peek().text!r} in a list")


def parse(text: str) -> File:
    """The syntax tree of a ``cue`` program; :class:`Unsupported` outside the subset."""
    return Parser(tokens(text, _interpolation)).file()


def _interpolation(toks: list[Tok], depth: int) -> Node:
    return Parser(toks, depth).whole_expr()
