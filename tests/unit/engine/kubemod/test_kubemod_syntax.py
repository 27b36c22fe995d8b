"""KubeMod's select dialect: what parses into which tree, and what is refused with where and why."""

from __future__ import annotations

import pytest

from kinitiras_py.engine.kubemod import syntax
from kinitiras_py.engine.kubemod.syntax import (
    Call,
    Compare,
    Descend,
    Field,
    Filter,
    Index,
    Literal,
    Logical,
    Not,
    Path,
    SelectError,
    Union,
    Wildcard,
)


@pytest.mark.parametrize(("text", "tree"), [
    ("$", Path("$", ())),
    ("$.kind", Path("$", (Field("kind"),))),
    ('$.metadata.labels["app.kubernetes.io/name"]',
     Path("$", (Field("metadata"), Field("labels"), Field("app.kubernetes.io/name")))),
    ("$['spec']", Path("$", (Field("spec"),))),
    ("$.a[0][-1]", Path("$", (Field("a"), Index(0), Index(-1)))),
    ("$.a[*].b.*", Path("$", (Field("a"), Wildcard(), Field("b"), Wildcard()))),
    ('$.a["x", "y"][0, 2]', Path("$", (Field("a"), Union(("x", "y")), Union((0, 2))))),
    ("$..image", Path("$", (Descend(), Field("image")))),
    ("$..[0]", Path("$", (Descend(), Index(0)))),
    ("$..*", Path("$", (Descend(), Wildcard()))),
    ("$.p[? @.port == 80]",
     Path("$", (Field("p"), Filter(Compare("==", Path("@", (Field("port"),)), Literal(80)))))),
    ("$.p[?(@.port >= 1.5)]",
     Path("$", (Field("p"), Filter(Compare(">=", Path("@", (Field("port"),)), Literal(1.5)))))),
    ("$.a =~ 'x'", Compare("=~", Path("$", (Field("a"),)), Literal("x"))),
    ('$.a !~ "x"', Compare("!~", Path("$", (Field("a"),)), Literal("x"))),
    ("!($.a == true) && $.b != false || $.c < -2",
     Logical("||", Logical("&&", Not(Compare("==", Path("$", (Field("a"),)), Literal(True))),
                           Compare("!=", Path("$", (Field("b"),)), Literal(False))),
             Compare("<", Path("$", (Field("c"),)), Literal(-2)))),
    ("length($.a) <= 3", Compare("<=", Call("length", Path("$", (Field("a"),))), Literal(3))),
    ("isDefined($.a) && isUndefined($.b) && isEmpty($.c) && isNotEmpty($.d)",
     Logical("&&", Logical("&&", Logical("&&", Call("isDefined", Path("$", (Field("a"),))),
                                         Call("isUndefined", Path("$", (Field("b"),)))),
                           Call("isEmpty", Path("$", (Field("c"),)))),
             Call("isNotEmpty", Path("$", (Field("d"),))))),
    ('"a\\n\\u00e9" == `raw\\n`', Compare("==", Literal("a\né"), Literal("raw\\n"))),
])
def test_parses(text: str, tree: syntax.Expr) -> None:
    assert syntax.parse(text) == tree


def test_plain_and_fanout() -> None:
    assert syntax.parse("$.a.b[0]").plain
    path = syntax.parse("$.a[*].b[? @.x == 1][0, 1]")
    assert isinstance(path, Path) and not path.plain and path.fanout == 3


@pytest.mark.parametrize(("text", "where", "why"), [
    ("", None, "must not be empty"),
    ("   ", None, "must not be empty"),
    ("kind", "at 0", "unknown name 'kind'"),
    ("$.", "at 2", "expected a field name or *"),
    ("$.a[", "at 4", "expected a quoted key"),
    ("$.a[0:2]", "at 5", "slices are not supported"),
    ("$.a[1.5]", "at 4", "whole number"),
    ("$.a + 1", "at 4", "unexpected character '+'"),
    ("$.a == ", "at 7", "expected a path, a literal"),
    ("$.a =~ $.b", "at 4", "must be a string literal"),
    ("@.a", "at 0", "only meaningful inside a filter"),
    ("$.a)", "at 3", "expected an operator or the end"),
    ("upper($.a)", "at 0", "unknown name 'upper'"),
    ("$.a in ['x']", "at 4", "expected an operator or the end"),
    ('"\\q"', "at 0", "unknown escape"),
    ("$.a == 99999999999999999999", "at 7", "does not fit a 64-bit integer"),
    ("(" * 40 + "$" + ")" * 40, None, "nested more than"),
])
def test_refuses(text: str, where: str | None, why: str) -> None:
    with pytest.raises(SelectError) as caught:
        syntax.parse(text)
    assert why in str(caught.value)
    if where is not None:
        assert str(caught.value).startswith(where)


def test_refuses_what_is_not_text() -> None:
    with pytest.raises(SelectError, match="must be a string"):
        syntax.parse(42)  # type: ignore[arg-type]
    with pytest.raises(SelectError, match="at most"):
        syntax.parse("$" + ".a" * 3000)
