"""Corpus programs calling CUE's package functions (strings, strconv, regexp, list), run on
objects whose label values sit on the edges where Go and CEL could part: signs, underscores,
spaces and overflow for Atoi, every spelling ParseBool knows, non-ASCII text, empty strings."""

from __future__ import annotations

from tests.cue.corpus import POD, Case

_HEAD = "object: _ @tag(object)\n"


def _labelled(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"v": value}}}


EDGES = tuple(_labelled(f"edge-{i}", v) for i, v in enumerate(
    ("42", "+1", "-7", "007", "1_000", " 12", "12 ", "", "T", "f", "9223372036854775807", "9223372036854775808",
     "-9223372036854775808", "0x1f", "true", "True", "TRUE", "t", "1", "0", "F", "yes", "héllo", "a,b,,c",
     "Mixed-Case_9", "xxaxx", "ß")))
ASCII_EDGES = tuple(o for o in EDGES if o["metadata"]["labels"]["v"].isascii())  # type: ignore[index]


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
)
"""Where CUE computes a value and the compiled program fails as unsupported (docs/cue.md), never
giving another value."""
