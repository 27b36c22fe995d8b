"""Corpus programs calling CUE's package functions (strings, strconv, regexp, list, math), run on
objects whose label values sit on the edges where Go and CEL could part: signs, underscores,
spaces and overflow for Atoi, every spelling ParseBool knows, non-ASCII text, empty strings,
quotes and control characters for Quote, halves and signs for rounding."""

from __future__ import annotations

from tests.cue.corpus import BARE, POD, Case

_HEAD = "object: _ @tag(object)\n"


def _labelled(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"v": value}}}


EDGES = tuple(_labelled(f"edge-{i}", v) for i, v in enumerate(
    ("42", "+1", "-7", "007", "1_000", " 12", "12 ", "", "T", "f", "9223372036854775807", "9223372036854775808",
     "-9223372036854775808", "0x1f", "true", "True", "TRUE", "t", "1", "0", "F", "yes", "héllo", "a,b,,c",
     "Mixed-Case_9", "xxaxx", "ß")))
ASCII_EDGES = tuple(o for o in EDGES if o["metadata"]["labels"]["v"].isascii())  # type: ignore[index]
QUOTED = tuple(_labelled(f"quote-{i}", v) for i, v in enumerate(
    ('say "hi"', "back\\slash", "tab\there", "lines\n\r", "bell\a\b\f\v", "~!@#$%^&*()_+{}|:<>?`")))
NUMBERS = tuple({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"number-{i}"}, "spec": {"n": n}}
                for i, n in enumerate((2.5, -2.5, 0.5, -0.5, 2, -7, 2.0, -0.1, 1e15 + 0.5, 4503599627370495.5,
                                       1.7976931348623157e308, "3", None, 9007199254740993)))


def _out(imports: str, value: str) -> str:
    """An override adding ``value`` (over ``v``, the object's label) at /x."""
    return (f"import {imports}\n" + _HEAD + "v: object.metadata.labels.v\n"
            f'patches: [{{op: "add", path: "/x", value: {value}}}]')


PACKAGE_CASES: tuple[Case, ...] = (
    Case("pkg-strings-case", "override", _out('"strings"', "[strings.ToUpper(v), strings.ToLower(v)]"), ASCII_EDGES),
    Case("pkg-strings-trim", "override", _out('"strings"', '[strings.TrimPrefix(v, "x"), '
                                              'strings.TrimSuffix(v, "x"), strings.TrimPrefix(v, ""), '
                                              'strings.TrimSuffix(v, v)]'), EDGES),
    Case("pkg-strings-replace", "override", _out('"strings"', '[strings.Replace(v, "x", "yz", -1), '
                                                 'strings.Replace(v, "x", "", 1), strings.Replace(v, "x", "q", 0)]'),
         EDGES),
    Case("pkg-strings-split", "override", _out('"strings"', '[strings.Split(v, ","), strings.Split(v, "x")]'),
         EDGES),
    Case("pkg-strings-index", "override", _out('"strings"', '[strings.Index(v, "a"), strings.Index(v, ""), '
                                               'strings.Index(v, "ll")]'), ASCII_EDGES),
    Case("pkg-strings-kinds", "override", _out('"strings"', "strings.ToUpper(len(v))"), (EDGES[0],)),
    Case("pkg-strconv-atoi", "override", _out('"strconv"', "strconv.Atoi(v)"), EDGES),
    Case("pkg-strconv-atoi-sum", "override", _out('"strconv"', "strconv.Atoi(v) + 1"), EDGES[:4]),
    Case("pkg-strconv-parsebool", "override", _out('"strconv"', "strconv.ParseBool(v)"), EDGES),
    Case("pkg-strconv-format", "override", _out('"strconv"', '[strconv.FormatInt(len(v), 10), '
                                                'strconv.FormatInt(-12, 10), strconv.FormatBool(v == "1")]'),
         EDGES),
    Case("pkg-regexp-match", "override", _out('"regexp"', '[regexp.Match("^[0-9]+$", v), '
                                              'regexp.Match("(?i)true", v)]'), EDGES),
    Case("pkg-regexp-bad", "override", _out('"regexp"', 'regexp.Match("(", v)'), (EDGES[0],)),
    Case("pkg-list-concat", "override", _out('"list"', 'list.Concat([[v], [], [1, [2]], ["z"]])'), EDGES[:2]),
    Case("pkg-list-concat-bad", "override", _out('"list"', 'list.Concat([[v], 3])'), EDGES[:1]),
    Case("pkg-math-round", "override", 'import "math"\n' + _HEAD + "n: object.spec.n\n"
         'patches: [{op: "add", path: "/x", value: [math.Floor(n), math.Ceil(n), math.Round(n), math.Trunc(n)]}]',
         tuple(o for o in NUMBERS if o["spec"]["n"] != 1.7976931348623157e308)),  # type: ignore[index]
    Case("pkg-math-abs", "override", 'import "math"\n' + _HEAD + "n: object.spec.n\n"
         'patches: [{op: "add", path: "/x", value: [math.Abs(n), math.Abs(-3), math.Floor(-3.5) * 2]}]', NUMBERS),
    Case("pkg-strconv-quote", "override", _out('"strconv"', "[strconv.Quote(v), strconv.Quote(\"\")]"),
         ASCII_EDGES + QUOTED),
    Case("pkg-strconv-quote-kind", "override", _out('"strconv"', "strconv.Quote(len(v))"), EDGES[:1]),
    Case("pkg-regexp-find", "override", _out('"regexp"', 'regexp.Find("[0-9]+", v)'), EDGES),
    Case("pkg-regexp-find-empty", "override", _out('"regexp"', '[regexp.Find("x*", v), regexp.Find("(?i)t|f", v)]'),
         EDGES),
    Case("pkg-regexp-findall", "override", _out('"regexp"', '[regexp.FindAll("[a-z]", v, -1), '
                                                'regexp.FindAll("x*", v, -1), regexp.FindAll("[0-9]", v, 2)]'),
         EDGES),
    Case("pkg-regexp-findall-zero", "override", _out('"regexp"', 'regexp.FindAll(".", v, 0)'), EDGES[:1]),
    Case("pkg-regexp-find-bad", "override", _out('"regexp"', 'regexp.Find("[", v)'), EDGES[:1]),
    Case("pkg-list-sort", "override", _out('("strings"\n"list")', '[list.Sort(strings.Split(v, ","), '
                                           'list.Ascending), list.Sort([3, len(v), -1], list.Descending), '
                                           'list.SortStrings(strings.Split(v, "x")), list.Sort([], list.Descending)]'),
         ASCII_EDGES),
    Case("pkg-list-sort-kinds", "override", _out('"list"', 'list.Sort([v, 1], list.Ascending)'), EDGES[:1]),
    Case("pkg-list-sort-bools", "override", _out('"list"', 'list.Sort([v == "1", true], list.Ascending)'),
         EDGES[:1]),
    Case("pkg-list-sort-one", "override", _out('"list"', 'list.Sort([{a: v}], list.Descending)'), EDGES[:1]),
    Case("pkg-list-sortstrings-kinds", "override", _out('"list"', 'list.SortStrings([v, 1])'), EDGES[:1]),
    Case("pkg-list-flatten", "override", _out('"list"', '[list.FlattenN([v, [v, [1, [2, []]]]], 1), '
                                              'list.FlattenN([[v], [[v]]], -1), list.FlattenN([[v]], 0), '
                                              'list.FlattenN([[[v]]], -3)]'), EDGES[:2]),
    Case("pkg-list-flatten-object", "override", 'import "list"\n' + _HEAD + 'patches: list.FlattenN([[for c in '
         'object.spec.containers {op: "add", path: "/x/-", value: c.name}], [[]]], -1)', (POD, BARE)),
    Case("pkg-list-flatten-kinds", "override", _out('"list"', 'list.FlattenN(v, 1)'), EDGES[:1]),
    Case("pkg-mixed-validate", "validate", 'import (\n\t"strings"\n\t"strconv"\n)\n' + _HEAD + """validate: {
    valid: strings.HasPrefix(strings.ToLower(object.metadata.name), "web") && strconv.Atoi("3") == 3
    reason: "name \\(strings.TrimSuffix(object.metadata.name, "-1"))"
}""", (POD,)),
)

DIFFERENCES: tuple[Case, ...] = (
    Case("pkg-strings-non-ascii", "override", _out('"strings"', "[strings.ToUpper(v), strings.ToLower(v), "
                                                   'strings.Index(v, "l")]'), EDGES[-5:-4] + EDGES[-1:]),
    Case("pkg-strings-replace-empty", "override", _out('"strings"', 'strings.Replace(v, "", "-", -1)'), EDGES[:3]),
    Case("pkg-strings-split-empty", "override", _out('"strings"', 'strings.Split(v, "")'), EDGES[:3]),
    Case("pkg-strconv-format-base", "override", _out('"strconv"', "strconv.FormatInt(len(v) + 253, 16)"), (EDGES[0],)),
    Case("pkg-strconv-quote-non-ascii", "override", _out('"strconv"', "strconv.Quote(v)"), EDGES[-5:-4] + EDGES[-1:]),
    Case("pkg-math-beyond-2-52", "override", 'import "math"\n' + _HEAD + 'patches: [math.Floor(object.spec.n)]',
         NUMBERS[10:11]),
    Case("pkg-math-abs-min-int", "override", 'import "math"\n' + _HEAD +
         'patches: [math.Abs(-9223372036854775807 + len(object.kind) - 4)]', NUMBERS[:1]),
    Case("pkg-list-sort-floats", "override", 'import "list"\n' + _HEAD +
         'patches: list.Sort([object.spec.n, 1], list.Ascending)', NUMBERS[:1]),
)
"""Where CUE computes a value and the compiled program fails as unsupported (docs/cue.md), never
giving another value."""
