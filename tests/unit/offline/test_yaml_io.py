"""The CLI's YAML reader (what kubectl reads) and writer (what every reader reads back)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.offline import loader
from kinitiras_py.offline.dumper import ambiguous, dump_yaml, dump_yaml_all


def parse(text: str) -> object:
    docs = loader.parse_yaml(text, "f.yaml")
    assert len(docs) == 1
    return docs[0]


@pytest.mark.parametrize(("text", "expected"), [
    # Keys kubectl (sigs.k8s.io/yaml) turns into strings.
    ("off: 1", {"false": 1}),
    ("on: 1", {"true": 1}),
    ("1: a", {"1": "a"}),
    ("0x10: a", {"16": "a"}),
    # Timestamps stay strings, keys and values (go-yaml v2 into interface{}).
    ("2024-01-01: b", {"2024-01-01": "b"}),
    ("v: 2024-01-01T10:00:00Z", {"v": "2024-01-01T10:00:00Z"}),
    # go-yaml v2 booleans PyYAML does not know.
    ("[y, Y, n, N, yes, off]", [True, True, False, False, True, False]),
    ("a: !!set {x, z}", {"a": {"x": None, "z": None}}),
    ("a: !!omap [{x: 1}, {z: 2}]", {"a": [{"x": 1}, {"z": 2}]}),  # no tuples: JSON has none
    ("a: 99999999999999999999", {"a": 1e20}),
    ("a: 18446744073709551615", {"a": 18446744073709551615}),
    ("<<: {a: 1}\nb: 2", {"a": 1, "b": 2}),
    ("a: &x 1\nb: *x", {"a": 1, "b": 1}),
])
def test_reads_what_kubectl_reads(text: str, expected: object) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("~: x", "f.yaml:1:1: a mapping key must be a string, an integer or a boolean, got '~'"),
    ("a:\n  1.5: x", "f.yaml:2:3: a mapping key must be a string"),
    ("? [a]\n: b", "got a list or a mapping"),
    ("a: !!binary aGVsbG8=", "f.yaml:1:4: !!binary values have no JSON equivalent"),
    ("a: .nan", "no JSON equivalent"),
    ("a: -.inf", "no JSON equivalent"),
    ("a: 1" + "0" * 5000, "is too large"),
    ("a: " + "[" * 3000 + "]" * 3000, "nested deeper than 200 levels"),
    ("a: " + "{b: " * 3000 + "1" + "}" * 3000, "nested deeper than 200 levels"),
    ("x: &x " + "[" * 150 + "]" * 150 + "\ny: " + "[" * 100 + "*x" + "]" * 100, "aliases expanded"),
    ("a: &a [*a]", "an alias refers to a node that contains it"),
    ("a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} " + "[" * 150 + f"*a{i - 1}" + "]" * 150 + "\n" for i in range(1, 30)),
     "nested deeper than 200 levels (aliases expanded)"),  # a chain of aliases, each within the limit
    ("a: &a [" + ",".join(["0"] * 10) + "]\n" + "".join(
        f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True)),
     "more than 1000000 values"),
    ("a: !foo 1", 'could not determine a constructor for the tag \'!foo\'\n  in "f.yaml", line 1'),
    # explicit tags that do not fit their text (found by the CLI fuzz: ValueError tracebacks)
    ("!!float x# c", "f.yaml:1:1: 'x# c' cannot be read as !!float"),
    ("a: !!int x", "f.yaml:1:4: 'x' cannot be read as !!int"),
    ("a: !!bool x", "f.yaml:1:4: 'x' cannot be read as !!bool"),
    ("a: !!map x", "f.yaml:1:4: !!map needs a mapping"),
    ("a: !!set [x]", "f.yaml:1:4: !!set needs a mapping"),
    ("a: [", "f.yaml: not valid YAML"),
])
def test_refuses_what_json_cannot_hold(text: str, message: str) -> None:
    with pytest.raises(loader.InputError) as e:
        loader.parse_yaml(text, "f.yaml")
    assert message in str(e.value)


def test_refuses_files_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(loader.InputError, match=r"bad.yaml: not UTF-8 text \(byte 3 is b'\\xff'\)"):
        loader.load_documents(path)


def test_reads_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert loader.load_documents(path) == [{"a": 1}]


# Strings that some YAML reader (go-yaml v2 as kubectl uses it, PyYAML's 1.1, or a 1.2 core
# schema reader) takes for something else when written bare.
AMBIGUOUS = ["y", "Y", "n", "N", "yes", "No", "ON", "off", "true", "False", "null", "Null", "~", "",
             "1e3", "1E3", "-1e-3", "0o12", "0O17", "012", "0x1F", "0b101", "1_000", "1:20", "+1", "-.5",
             "1.", ".5", ".inf", "-.Inf", ".NaN", "2024-01-01", "2024-1-1 10:00:00"]


@pytest.mark.parametrize("text", AMBIGUOUS)
def test_quotes_every_string_some_reader_takes_for_a_scalar(text: str) -> None:
    assert ambiguous(text)
    out = dump_yaml({"key": text, text: "key"})
    assert yaml.safe_load(out) == {"key": text, text: "key"}
    assert parse(out) == {"key": text, text: "key"}
    assert f"key: {text}\n" not in out


@pytest.mark.parametrize("text", ["web", "500m", "1Gi", "nginx:1.27", "v1", "a b", "/metadata/labels"])
def test_leaves_plain_words_bare(text: str) -> None:
    assert dump_yaml({"k": text}) == f"k: {text}\n"


def test_multiline_strings_are_blocks() -> None:
    assert dump_yaml({"cel": "a\nb\n"}) == "cel: |\n  a\n  b\n"
    assert dump_yaml_all([{"a": "y"}, {"b": 1}]) == 'a: "y"\n---\nb: 1\n'


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(JSON_VALUES)
def test_every_json_value_reads_back_identically(value: object) -> None:
    out = dump_yaml(value)
    assert _same(yaml.safe_load(out), value)  # a YAML 1.1 reader
    assert _same(parse(out), value)  # what kubectl reads


@given(st.text())
def test_every_bare_string_is_a_string_to_every_reader(text: str) -> None:
    out = dump_yaml({"k": text})
    assert yaml.safe_load(out) == {"k": text}
    assert parse(out) == {"k": text}
