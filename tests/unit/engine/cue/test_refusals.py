"""Programs outside the subset are refused with the construct, its line and its column."""

from __future__ import annotations

import pytest

from kinitiras_py.engine.cue import compile_cue
from kinitiras_py.engine.cue.syntax import Unsupported

HEAD = "object: _\n"

REFUSED = [
    ('import "net"\npatches: []', (1, 8), "package 'net' is not supported"),
    ('import s "strings"\npatches: []', (1, 8), "aliases are not supported"),
    (HEAD + 'patches: [strings.HasPrefix("a", "b")]', (2, 19), "with their package imported"),
    ('import "strings"\n' + HEAD + 'patches: [strings.HasPrefix("a")]', (3, 19), "takes 2 arguments"),
    ('import "strconv"\n' + HEAD + 'patches: [strconv.Unquote("a")]', (3, 19), "call of `strconv.Unquote` is not"),
    ('import "regexp"\n' + HEAD + 'patches: [regexp.FindSubmatch("(a)", "b")]', (3, 18),
     "`regexp.FindSubmatch` is not supported: it returns capture groups"),
    ('import "regexp"\n' + HEAD + 'patches: regexp.FindAllNamedSubmatch("(a)", "b", -1)', (3, 17),
     "`regexp.FindAllNamedSubmatch` is not supported: it returns capture groups"),
    ('import "math"\n' + HEAD + 'patches: [math.Pow(2, 3)]', (3, 16), "`math.Pow` is not supported: it computes"),
    ('import "math"\n' + HEAD + 'patches: [math.Sqrt(2)]', (3, 16), "`math.Sqrt` is not supported: it computes"),
    ('import "math"\n' + HEAD + 'patches: [math.RoundToEven(2.5)]', (3, 16), "`math.RoundToEven` is not supported"),
    ('import "math"\n' + HEAD + 'patches: [math.Max(1, 2)]', (3, 16), "call of `math.Max` is not supported"),
    (HEAD + 'patches: [math.Floor(1.5)]', (2, 16), "with their package imported"),
    ('import "math"\n' + HEAD + 'patches: [math.Floor(1, 2)]', (3, 16), "`math.Floor` takes 1 argument"),
    ('import "list"\n' + HEAD + 'patches: list.Sort([2, 1], {x: _, y: _, less: x > y})', (3, 28),
     "takes `list.Ascending` or `list.Descending` only"),
    ('import "list"\n' + HEAD + 'patches: list.Sort([2, 1])', (3, 15), "`list.Sort` takes 2 arguments"),
    ('import "list"\n' + HEAD + 'patches: list.FlattenN([[1]])', (3, 15), "`list.FlattenN` takes 2 arguments"),
    ('import "strconv"\n' + HEAD + 'patches: [strconv.Quote("a", "b")]', (3, 19), "`strconv.Quote` takes 1 argument"),
    ("data: _\nobject: data.object + 1\npatches: []", (2, 21), "a path below `data`"),
    ('import "strings"\n' + HEAD + 'patches: [strings.Replace("a", "b", "c")]', (3, 19), "takes 4 arguments"),
    ('import "strconv"\n' + HEAD + 'patches: [strconv.Atoi()]', (3, 19), "takes 1 argument"),
    ('package p\npatches: []', (1, 1), "`package` is not supported"),
    (HEAD + "x: 1\n", (1, 1), "no `patches` field"),
    (HEAD + 'patches: [{a: strings.ToUpper("x")}]', (2, 23), "call of `strings.ToUpper` is not supported"),
    (HEAD + 'patches: [object.f(1)]', (2, 18), "call of `object.f` is not supported"),
    (HEAD + 'patches: [[1](2)]', (2, 11), "only `len(...)` and package functions can be called"),
    (HEAD + "patches: [1 / 2]", (2, 13), "`/` is not supported"),
    (HEAD + "patches: [object.a | object.b]", (2, 18), "disjunctions are supported of constants only"),
    (HEAD + "patches: [object.spec[0:1]]", (2, 22), "slices"),
    (HEAD + "patches: [...]", (2, 11), "open lists"),
    (HEAD + 'patches: [{[string]: 1}]', (2, 12), "pattern and dynamic labels"),
    (HEAD + 'patches: [{a?: 1}]', (2, 13), "optional and required field markers"),
    (HEAD + 'patches: ["""\nx"""]', (2, 11), "multi-line strings"),
    (HEAD + 'patches: ["\\u0041"]', (2, 12), "string escape \\u"),
    (HEAD + 'patches: [<5]', (2, 11), "bound constraint"),
    (HEAD + 'patches: [{for x in [1] {a: x}}]', (2, 12), "`for` inside a struct"),
    (HEAD + 'patches: [{for k, v in object.metadata {"\\(k)": v}}]', (2, 41), "interpolated labels"),
    (HEAD + 'patches: [{_h: 1}]', (2, 12), "hidden fields and definitions are supported at the top level only"),
    (HEAD + 'patches: [{let x = 1, a: x}]', (2, 12), "`let` is supported at the top level only"),
    (HEAD + "object: _\npatches: []", (2, 1), "declared twice"),
    ("object: {}\npatches: []", (1, 9), "may only be declared as `_`"),
    ("object: _ @tag(data)\npatches: []", (1, 1), "attribute @tag(data)"),
    (HEAD + "x: 1 @go(x)\npatches: []", (2, 1), "attribute @go(x)"),
    (HEAD + "patches: [oldObject.spec]", (2, 11), "reference `oldObject` not found"),
    (HEAD + "patches: [missing]", (2, 11), "reference `missing` not found"),
    (HEAD + "let unused = 1\npatches: []", (2, 1), "unreferenced let clause"),
    (HEAD + 'x: object.spec.replicas + 1\npatches: []', (2, 1), "`x` is not read by `patches`"),
    (HEAD + 'x: object.spec.replicas + 1\npatches: [if true {x}]', (2, 1), "read only inside a comprehension"),
    (HEAD + "a: b + 1\nb: a + 1\npatches: [a]", (2, 1), "refers to itself"),
    (HEAD + "patches: [{a: {b: 1, c: b}}]", (2, 25), "a field of a nested struct"),
    (HEAD + "patches: [(object.a + 1) == _|_]", (2, 21), "`_|_` tests are supported on paths from the inputs only"),
    (HEAD + "patches: [object.a[object.i] != _|_]", (2, 19), "constant indexes only"),
    (HEAD + 'patches: [{a: {x: 1}, if true {a: {y: 2}}}]', (2, 35), "declared twice with struct or list values"),
    (HEAD + "patches: [+1]", (2, 11), "unary `+`"),
    (HEAD + "patches: [1 |]", (2, 14), "unexpected ']'"),
    (HEAD + "patches: [99999999999999999999]", (2, 11), "beyond 64 bits"),
    (HEAD + "patches: [1e999]", (2, 11), "beyond the range of a float"),
    (HEAD + "patches: [if object.x \"a\"]", (2, 23), "must be a struct"),
    (HEAD + "patches: [for x in [1] let y = x {y}]", (2, 24), "`let` clauses inside comprehensions"),
    (HEAD + "if true {a: 1}\npatches: []", (2, 1), "top-level comprehensions"),
    (HEAD + "patches: [for i, (x) in [1] {i}]", (2, 18), "expected a variable name after `for k,`"),
    (HEAD + "patches: [{a: 1} {b: 2}]", (2, 18), "unexpected '{'"),
    (HEAD + "patches: [`x`]", (2, 11), "unexpected character '`'"),
]


@pytest.mark.parametrize(("program", "pos", "what"), REFUSED, ids=[w for _, _, w in REFUSED])
def test_refused_with_construct_line_and_column(program: str, pos: tuple[int, int], what: str) -> None:
    with pytest.raises(Unsupported) as caught:
        compile_cue(program, "override")
    assert what in caught.value.what
    assert caught.value.pos == pos, str(caught.value)


def test_validate_output_is_read_from_validate() -> None:
    with pytest.raises(Unsupported, match="no `validate` field"):
        compile_cue(HEAD + "patches: []", "validate")


def test_override_never_gets_old_object() -> None:
    source = compile_cue("object: _\noldObject: _\npatches: [oldObject.a]", "override")
    assert "cue: incomplete: oldObject is not set" in source
    assert "request.operation" not in source
