"""The C (libyaml) loader reads exactly what the pure-Python loader reads, and refuses the same.

parse_yaml uses libyaml's scanner and parser when PyYAML has them (a 10 MB manifest in seconds,
not a minute) with the loader module's own composer, constructors and resolvers on top: every
value, key conversion and refusal must stay as the pure-Python reference gives them.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kinitiras_py.offline import loader

needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")


def test_the_c_loader_is_used_when_pyyaml_has_libyaml() -> None:
    assert (loader.LOADER.__name__ == "_CLoader") is yaml.__with_libyaml__

TRICKY = [
    "created: 2024-01-01T10:00:00Z\ndate: 2024-01-01\nspaced: 2001-12-14 21:59:43.10 -5\n",  # stay strings
    "a: y\nb: N\nc: yes\nd: off\ne: On\nf: TRUE\ng: ~\nh: null\ni: ''\n",
    "hex: 0x1F\noct: 012\noct2: 0o12\nsexa: 1:20\nunder: 1_000\nbig: 18446744073709551615\n"
    "bigger: 18446744073709551616\nneg: -9223372036854775808\n",
    "f: 1.5\ng: 1e3\nh: -.5\ni: 6.8523015e+5\nj: 1_000.5\n",
    "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\nlist: &l [1, 2]\nagain: *l\n",
    "set: !!set {a, b}\nomap: !!omap [a: 1, b: 2]\npairs: !!pairs [a: 1, a: 2]\n",
    "off: 1\n1: 2\ntrue: 3\n0x10: 4\n",
    "str: !!str 1\nint: !!int '7'\nfloat: !!float '1'\n",
    "lit: |\n  a\n   b\n\nfold: >-\n  c\n  d\nq: \"tab\\there\\u00e9\"\ns: 'it''s'\n",
    "é: ünïcödé\nemoji: \"\\U0001F600\"\n",
    "---\na: 1\n---\n---\n- 1\n- [2, {b: 3}]\n...\n",
    "kind: List\napiVersion: v1\nitems:\n- {kind: Pod, apiVersion: v1, metadata: {name: a}}\n",
    "a: 1\na: 2\n",  # the last of equal keys wins
    "? [complex]\n: 1\n",
    "a: !!binary aGVsbG8=\n",
    "a: .nan\n",
    "a: -.inf\n",
    "a: !!float x\n",
    "~: 1\n",
    "1.5: x\n",
    "a: &a [*a]\n",
    "a: " + "[" * 201 + "]" * 201 + "\n",
    "a: " + "[" * 100_000 + "]" * 100_000 + "\n",  # libyaml's own composer would crash on this
    "a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
    "a: [unclosed\n",
    "a: 'x\n",
]


def _read(text: str, loader_class: type) -> tuple[str, object]:
    try:
        return "ok", loader.parse_yaml(text, "f.yaml", loader_class)
    except loader.InputError as e:
        return "refused", str(e).split(": not valid YAML")[0] if "not valid YAML" in str(e) else str(e)


@needs_libyaml
@pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
def test_the_c_loader_reads_and_refuses_as_the_pure_loader(text: str) -> None:
    c, pure = _read(text, loader.LOADER), _read(text, loader._Loader)
    assert c == pure


def test_timestamps_stay_strings_and_y_is_true() -> None:
    assert loader.parse_yaml("t: 2024-01-01T10:00:00Z\nb: y\n", "f") == [{"t": "2024-01-01T10:00:00Z", "b": True}]


PIECES = ["a", "b", "- ", ": ", "[", "]", "{", "}", ", ", "&x ", "*x", "!!str ", "!!int ", "<<: ", "? ", "y", "1",
          "0x1F", "2024-01-01", "'q'", '"d"', "|\n  ", ">\n  ", "\n", "\n  ", "\n    ", "#c", "---\n", "~", "é"]


@needs_libyaml
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_any_token_soup_gives_the_same_values_or_both_refuse(pieces: list[str]) -> None:
    text = "".join(pieces)
    c, pure = _read(text, loader.LOADER), _read(text, loader._Loader)
    assert c[0] == pure[0], (text, c, pure)
    if c[0] == "ok":
        assert c == pure
