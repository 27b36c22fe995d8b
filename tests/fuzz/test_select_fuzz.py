"""Fuzz: KubeMod's select dialect and Go template translation.

Invariants:

* any text parses into a tree or is refused with :class:`SelectError` (never another exception);
* a select built from the dialect's own pieces becomes CEL that either compiles or is refused
  with a field path, and a compiled one never fails when it runs, on any object: KubeMod's
  undefined values and type mismatches are false, never errors;
* the same holds for a fanned-out patch select, and for a translated Go template reading its
  key parts (``.#N``, ``index .SelectKeyParts N``), which fails only for a key part the select
  does not have, as Go's ``index`` does;
* any template text translates or is refused with :class:`Untranslatable`;
* KubeMod's comparisons (``kubemod.compare``) and Go's number reading take any values and never
  raise.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.base.errors import CelCompileError, CelEvalError, PolicyError
from kinitiras_py.convert import gotemplate
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.evaluation.kubemodlib import go_number, gval_compare
from kinitiras_py.engine.kubemod import fanout, syntax
from tests.compiling import render_criterion, render_select

PIECES = ["$", "@", ".", "..", "[", "]", "(", ")", "*", "?", ",", ":", "'", '"', "==", "!=", "<", "<=", ">", ">=",
          "=~", "!~", "&&", "||", "!", "-", "1", "0", "1.5", "a", "kind", "length", "isEmpty", "isDefined",
          "true", " ", "\\", "`", "é", "\x00"]
NAMES = st.sampled_from(["a", "b", "kind", "spec", "x/y", "~", "", "0", "é", "namespace", "containers"])


@given(st.text(max_size=40) | st.lists(st.sampled_from(PIECES), max_size=20).map("".join))
def test_any_text_parses_or_is_refused(text: str) -> None:
    try:
        tree = syntax.parse(text)
    except syntax.SelectError as e:
        assert str(e)
        return
    assert tree is not None


def _segment(filters: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        NAMES.filter(str.isidentifier).map(lambda n: "." + n),
        NAMES.map(lambda n: f'["{n}"]'),
        st.integers(-2, 3).map(lambda i: f"[{i}]"),
        st.just("[*]"), st.just(".*"),
        st.lists(NAMES, min_size=2, max_size=3).map(lambda ks: "[" + ", ".join(f"'{k}'" for k in ks) + "]"),
        filters.map(lambda f: f"[? {f}]"),
    )


def _path(root: str, filters: st.SearchStrategy[str], descend: bool = True) -> st.SearchStrategy[str]:
    segments = st.lists(_segment(filters), max_size=4).map("".join)
    if descend:
        return st.tuples(segments, st.booleans(), segments).map(
            lambda p: root + p[0] + (".." + (p[2][1:] if p[2].startswith(".") else p[2] or "a") if p[1] else p[2]))
    return segments.map(lambda s: root + s)


LITERALS = st.sampled_from(["1", "-2", "1.5", "'x'", '"nginx"', "true", "false", "''", "'2'", "'1.5e3'", "'NaN'",
                           "'0x1p4'", "'-Inf'"])
PLAIN = st.lists(NAMES.filter(str.isidentifier).map(lambda n: "." + n) | st.integers(0, 2).map(lambda i: f"[{i}]"),
                 max_size=3).map("".join)


SEVERAL = st.tuples(PLAIN, st.sampled_from(["[*]", ".*", "[0, 1]", "..a", "[? @ == 1]", "[? isEmpty(@.a)]"]),
                    PLAIN).map("".join)
"""A path with several values (the array KubeMod's functions read)."""


def _conditions(current: str) -> st.SearchStrategy[str]:
    operand = st.one_of(PLAIN.map(lambda p: current + p), PLAIN.map(lambda p: "$" + p), LITERALS,
                        PLAIN.map(lambda p: f"length({current}{p})"), SEVERAL.map(lambda p: f"length({current}{p})"))
    compare = st.tuples(operand, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), operand).map(" ".join)
    match = st.tuples(PLAIN.map(lambda p: current + p), st.sampled_from(["=~", "!~"]),
                      st.sampled_from(["'a'", "'^x$'", "'(?i)n'"])).map(" ".join)
    call = st.tuples(st.sampled_from(["isDefined", "isUndefined", "isEmpty", "isNotEmpty"]),
                     (PLAIN | SEVERAL).map(lambda p: current + p)).map(lambda c: f"{c[0]}({c[1]})")
    atom = compare | match | call | PLAIN.map(lambda p: current + p)
    return st.recursive(atom, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(" ".join),
        inner.map(lambda c: f"!({c})"), inner.map(lambda c: f"({c})")), max_leaves=4)


SELECTS = st.one_of(_path("$", _conditions("@")), _conditions("$"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**7) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "a", "nginx", "x/y", "é"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3), max_leaves=12)


@given(SELECTS, st.sampled_from([{}, {"matchValue": "1"}, {"matchValues": ["a", "true"]},
                                 {"matchRegex": "^n"}, {"matchFor": "All", "matchValue": "a"}]),
       st.booleans(), st.lists(JSON, min_size=1, max_size=3))
def test_selects_compile_and_never_fail_when_run(select: str, compare: dict[str, Any], negate: bool,
                                                 objects: list[Any]) -> None:
    condition = {"select": select, "negate": negate, **compare}
    try:
        source = render_criterion(condition, "spec.matchConditions[0]")
        program = cel.compile_program(source)
    except PolicyError as e:
        assert e.path == "spec.matchConditions[0].select" and e.reason
        return
    except CelCompileError as e:
        assert "exceeds the budget" in str(e) or "recursion" in str(e), e
        return
    for obj in objects:
        assert isinstance(program.evaluate({"object": obj, "namespaceObject": obj}), bool)


def _fanned(op: dict[str, Any]) -> tuple[cel.Program, int] | None:
    """A fanned-out operation's program and depth, or None when it is refused as it may be: its
    select by its field, its CEL for its cost or its nesting."""
    try:
        made = render_select(op, "p")
        return cel.compile_program(made.source), made.depth
    except PolicyError as e:
        assert e.path == "p.select" and e.reason
    except CelCompileError as e:
        assert "exceeds the budget" in str(e) or "recursion" in str(e), e
    return None


@given(_path("$", _conditions("@"), descend=False), st.lists(JSON, min_size=1, max_size=3))
def test_patch_selects_compile_and_never_fail_when_run(select: str, objects: list[Any]) -> None:
    op = {"op": "add", "select": select, "path": "/x", "valueTemplate": "{{ selectKeyParts }}"}
    fanned = _fanned(op)
    if fanned is None:
        return
    program, depth = fanned
    for obj in objects:
        ops = fanout.operations(program.evaluate({"object": obj}), op, depth)
        assert all(o["op"] == "add" and isinstance(o["value"], list) for o in ops)


SHALLOW = st.recursive(st.none() | st.integers(-1, 2) | st.sampled_from(["", "a"]),
                       lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["a", "b"]), inner,
                                                                                   max_size=2), max_leaves=6)
"""Small objects full of empty lists and maps, where counting meets nothing to count."""


@given(st.sampled_from(["length", "isEmpty", "isNotEmpty", "isDefined"]),
       st.tuples(st.sampled_from(["", ".a", "[0]"]),
                 st.sampled_from(["[*]", ".*", "..a", "..*", "[? @ == 1]", "[0, 1]"]),
                 st.sampled_from(["", ".a", "[*]", "[? isEmpty(@)]", ".b[*]"])).map("".join),
       st.lists(SHALLOW, min_size=1, max_size=4))
def test_counts_never_fail_when_run(function: str, path: str, objects: list[Any]) -> None:
    select = f"{function}(${path})" + (" >= 0" if function == "length" else "")
    try:
        program = cel.compile_program(render_criterion({"select": select}, "spec.matchConditions[0]"))
    except CelCompileError as e:
        assert "exceeds the budget" in str(e) or "recursion" in str(e), e
        return
    for obj in objects:
        assert isinstance(program.evaluate({"object": obj}), bool)


KEY_PART_TEMPLATES = st.lists(st.sampled_from(
    ["{{ .#0 }}", "{{ .#1 }}", "{{ .#2 }}", "{{ index .SelectKeyParts 0 }}", "{{ .#0 | quote }}", "{{ (.#1) }}",
     "{{ quote .#0 }}", "{{ .SelectedItem }}", "-", ".#1", "x: "]), min_size=1, max_size=4).map("".join)


@given(_path("$", _conditions("@"), descend=False), KEY_PART_TEMPLATES, st.lists(JSON, min_size=1, max_size=3))
def test_key_parts_in_translated_templates_never_fail_but_out_of_range(select: str, template: str,
                                                                       objects: list[Any]) -> None:
    op = {"op": "add", "select": select, "path": "/x",
          "valueTemplate": gotemplate.translate(gotemplate.expand_key_parts(template))}
    fanned = _fanned(op)
    if fanned is None:
        return
    program, depth = fanned
    for obj in objects:
        try:
            fanout.operations(program.evaluate({"object": obj}), op, depth)
        except CelEvalError as e:
            # Go's index fails on a key part the select does not have; a rendered value may not be YAML.
            named = [int(n) for n in re.findall(r"SelectKeyParts (\d+)", gotemplate.expand_key_parts(template))]
            assert max(named, default=-1) >= depth or "not YAML" in str(e) or "too large" in str(e), e


VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
                      | st.sampled_from(["2", "1e400", "NaN", "0x1p3", "1_0", " 1", "-Inf"]),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                    max_size=3), max_leaves=6)


@given(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), VALUES, VALUES)
def test_kubemod_comparisons_take_any_values(op: str, a: Any, b: Any) -> None:
    assert isinstance(gval_compare(op, a, b), bool)
    if op == "==":
        assert gval_compare("!=", a, b) is not gval_compare(op, a, b)


@given(st.text(max_size=20) | st.from_regex(r"[+-]?(0x)?[0-9_a-fA-F.]{0,8}([eEpP][+-]?[0-9_]{0,3})?", fullmatch=True))
def test_go_number_reads_any_text(text: str) -> None:
    number = go_number(text)
    assert number is None or isinstance(number, float)


@given(st.text(max_size=40) | st.lists(st.sampled_from(
    ["{{", "}}", "{{-", "-}}", ".Target", ".Namespace", ".SelectedItem", ".a", " ", "|", "quote", "index",
     "default", "regexReplaceAll", '"x"', "`y`", "1", "(", ")", "if", "end", "$x", "."]), max_size=12).map("".join))
def test_any_template_translates_or_is_refused(text: str) -> None:
    try:
        translated = gotemplate.translate(text)
    except gotemplate.Untranslatable as e:
        assert str(e)
        return
    assert isinstance(translated, str)
