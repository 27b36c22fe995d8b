"""Field path syntax: dotted, bracketed, JSON pointer and the kinitiras label/annotation form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.engine.objects.fieldpath import format_path, get_path, parse_path, to_pointer

POD: dict[str, Any] = {
    "metadata": {
        "name": "web",
        "labels": {"app.kubernetes.io/name": "web", "tier": "front", "0": "zero"},
        "annotations": {"a1.b1/c1": "x", "k": ""},
    },
    "spec": {
        "replicas": 3,
        "paused": False,
        "nothing": None,
        "containers": [{"name": "app", "image": "nginx:1"}, {"name": "side", "image": "envoy"}],
        "a.b": {"c/d": 1, "~e": 2},
    },
}


@pytest.mark.parametrize(("path", "tokens"), [
    ("spec.replicas", ("spec", "replicas")),
    ("spec", ("spec",)),
    ("spec.containers[0].image", ("spec", "containers", 0, "image")),
    ("spec.containers[10]", ("spec", "containers", 10)),
    ("[0].a", (0, "a")),
    ("a[0][1]", ("a", 0, 1)),
    ("metadata.labels['app.kubernetes.io/name']", ("metadata", "labels", "app.kubernetes.io/name")),
    ('metadata.labels["app.kubernetes.io/name"]', ("metadata", "labels", "app.kubernetes.io/name")),
    ("spec['a.b']['c/d']", ("spec", "a.b", "c/d")),
    (r"a['it\'s']", ("a", "it's")),
    (r'a["say \"hi\""]', ("a", 'say "hi"')),
    (r"a['back\\slash']", ("a", "back\\slash")),
    ("a['']", ("a", "")),
    ("a['0']", ("a", "0")),
    ("a.0", ("a", "0")),
    ("spec.a/b", ("spec", "a/b")),
    ("spec.x-y_z:1", ("spec", "x-y_z:1")),
])
def test_parse_dotted(path: str, tokens: tuple[Any, ...]) -> None:
    assert parse_path(path) == tokens


@pytest.mark.parametrize(("path", "tokens"), [
    # kinitiras: everything after the first .labels. / .annotations. is one key.
    ("metadata.annotations.a1.b1/c1", ("metadata", "annotations", "a1.b1/c1")),
    ("metadata.labels.app.kubernetes.io/name", ("metadata", "labels", "app.kubernetes.io/name")),
    ("metadata.labels.tier", ("metadata", "labels", "tier")),
    ("spec.template.metadata.labels.a.b", ("spec", "template", "metadata", "labels", "a.b")),
    ("metadata.labels.x.annotations.y", ("metadata", "labels", "x.annotations.y")),
    ("metadata.annotations.x.labels.y", ("metadata", "annotations", "x.labels.y")),
    # Brackets turn the compatibility rule off.
    ("metadata.labels.a[0]", ("metadata", "labels", "a", 0)),
    # Only an interior ".labels." counts.
    ("labels.a.b", ("labels", "a", "b")),
    ("metadata.labels", ("metadata", "labels")),
])
def test_parse_kinitiras_compat(path: str, tokens: tuple[Any, ...]) -> None:
    assert parse_path(path) == tokens


@pytest.mark.parametrize(("path", "tokens"), [
    ("/spec/containers/0/image", ("spec", "containers", 0, "image")),
    ("/metadata/labels/app.kubernetes.io~1name", ("metadata", "labels", "app.kubernetes.io/name")),
    ("/a~0b/~01", ("a~b", "~1")),
    ("/a/01", ("a", "01")),
    ("/a/-1", ("a", "-1")),
    ("/", ("",)),
    ("/a/", ("a", "")),
])
def test_parse_pointer(path: str, tokens: tuple[Any, ...]) -> None:
    assert parse_path(path) == tokens


@pytest.mark.parametrize(("path", "message"), [
    ("", "invalid field path: it must be a non-empty string"),
    ("a..b", "invalid field path 'a..b': empty key at offset 2"),
    (".a", "invalid field path '.a': empty key at offset 0"),
    ("a.", "invalid field path 'a.': ends with '.'"),
    ("a[", "invalid field path 'a[': unclosed '[' at offset 1"),
    ("a[01]", "invalid field path 'a[01]': list index '01' must be a non-negative integer without"
              " leading zeros (quote keys: ['key'])"),
    ("a[-1]", "invalid field path 'a[-1]': list index '-1' must be a non-negative integer without"
              " leading zeros (quote keys: ['key'])"),
    ("a[x]", "invalid field path 'a[x]': list index 'x' must be a non-negative integer without"
             " leading zeros (quote keys: ['key'])"),
    ("a['x", "invalid field path \"a['x\": unterminated quote at offset 2"),
    ("a['x'", "invalid field path \"a['x'\": expected ']' at offset 5"),
    ("a['x']b", "invalid field path \"a['x']b\": unexpected 'b' at offset 6"),
    ("a.[0]", "invalid field path 'a.[0]': expected a key after '.' at offset 2"),
    ("a b", "invalid field path 'a b': unexpected ' ' at offset 1"),
    ("a]", "invalid field path 'a]': unexpected ']' at offset 1"),
    ("a'b", "invalid field path \"a'b\": unexpected \"'\" at offset 1"),
    ("/a~2", "invalid field path '/a~2': bad escape in pointer token 'a~2' (use ~0 for '~', ~1 for '/')"),
    ("/a~", "invalid field path '/a~': bad escape in pointer token 'a~' (use ~0 for '~', ~1 for '/')"),
    ("metadata.labels.", "invalid field path 'metadata.labels.': no key after '.labels.'"),
    ("meta..labels.x", "invalid field path 'meta..labels.x': empty key at offset 5"),
])
def test_parse_errors(path: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_path(path)
    assert str(info.value) == message


def test_parse_is_cached() -> None:
    parse_path.cache_clear()
    first = parse_path("spec.containers[0].image")
    assert parse_path("spec.containers[0].image") is first
    assert parse_path.cache_info().hits == 1


@pytest.mark.parametrize(("path", "expected"), [
    ("spec.replicas", (True, 3)),
    ("spec.paused", (True, False)),
    ("spec.nothing", (True, None)),
    ("spec.containers[1].image", (True, "envoy")),
    ("spec.containers.1.image", (True, "envoy")),
    ("/spec/containers/0/name", (True, "app")),
    ("metadata.labels.app.kubernetes.io/name", (True, "web")),
    ("metadata.labels['app.kubernetes.io/name']", (True, "web")),
    ("metadata.annotations.a1.b1/c1", (True, "x")),
    ("metadata.annotations.k", (True, "")),
    ("/metadata/labels/0", (True, "zero")),
    ("metadata.labels['0']", (True, "zero")),
    ("spec['a.b']['c/d']", (True, 1)),
    ("/spec/a.b/~0e", (True, 2)),
    ("spec.containers", (True, [{"name": "app", "image": "nginx:1"}, {"name": "side", "image": "envoy"}])),
    ("spec.missing", (False, None)),
    ("spec.containers[2].image", (False, None)),
    ("spec.containers.x", (False, None)),
    ("spec.containers.01", (False, None)),
    ("spec.replicas.x", (False, None)),
    ("metadata.labels.nope", (False, None)),
])
def test_get_path(path: str, expected: tuple[bool, Any]) -> None:
    assert get_path(POD, parse_path(path)) == expected


def test_get_path_edge_tokens() -> None:
    assert get_path(POD, ()) == (True, POD)
    assert get_path([1, 2], (-1,)) == (False, None)
    assert get_path("text", ("a",)) == (False, None)


@pytest.mark.parametrize(("tokens", "pointer"), [
    (("spec", "containers", 0, "image"), "/spec/containers/0/image"),
    (("metadata", "labels", "app.kubernetes.io/name"), "/metadata/labels/app.kubernetes.io~1name"),
    (("a~b", "~/"), "/a~0b/~0~1"),
    ((), ""),
    (("",), "/"),
])
def test_to_pointer(tokens: tuple[Any, ...], pointer: str) -> None:
    assert to_pointer(tokens) == pointer


@pytest.mark.parametrize(("tokens", "text"), [
    (("spec", "replicas"), "spec.replicas"),
    (("spec", "containers", 0, "image"), "spec.containers[0].image"),
    (("metadata", "labels", "app.kubernetes.io/name"), "metadata.labels['app.kubernetes.io/name']"),
    (("metadata", "labels", "tier"), "metadata.labels['tier']"),
    (("metadata", "annotations", "a", "b"), "metadata.annotations['a'].b"),
    (("labels", "tier"), "labels.tier"),
    (("a", "0"), "a['0']"),
    ((0, "a"), "[0].a"),
    (("a", "it's", "back\\slash"), r"a['it\'s']['back\\slash']"),
    (("a-b", "c_d", "9x"), "a-b.c_d.9x"),
    (("",), "['']"),
    ((), ""),
])
def test_format_path(tokens: tuple[Any, ...], text: str) -> None:
    assert format_path(tokens) == text
    if tokens:
        assert parse_path(text) == tokens


KEYS = st.text(alphabet="ab.0/~'\"\\[] -_", max_size=6) | st.sampled_from(["labels", "annotations"])
TOKENS = st.lists(
    st.integers(0, 10**6) | KEYS,
    min_size=1,
    max_size=6,
).map(tuple)


@given(TOKENS)
def test_format_parse_roundtrip(tokens: tuple[Any, ...]) -> None:
    assert parse_path(format_path(tokens)) == tokens


@given(TOKENS)
def test_pointer_parse_roundtrip(tokens: tuple[Any, ...]) -> None:
    # Pointer tokens that look like indexes come back as ints; get_path treats both alike.
    expected = tuple(int(t) if isinstance(t, str) and t.isdigit() and str(int(t)) == t else t for t in tokens)
    assert parse_path(to_pointer(tokens)) == expected
