"""Regular expressions on request data run on RE2, matched as Go's regexp matches."""

from __future__ import annotations

import pytest

from kinitiras_py.engine.evaluation import celext, kubemodlib


@pytest.mark.parametrize(("pattern", "text", "replacement", "expected"), [
    # Go: empty matches abutting a preceding match are ignored (Python's re.sub gives XbXXcX).
    ("a*", "baaac", "X", "XbXcX"),
    ("(.+)/(.*)", "my-repo/app:1", "new/${2}", "new/app:1"),
    ("(?P<repo>[^/]+)/", "docker.io/app", "${repo}-$$-", "docker.io-$-app"),
    ("x", "axbxc", "$9", "abc"),  # a group that does not exist expands to nothing
    ("é+", "cafééé!", "e", "cafe!"),  # positions in characters, not UTF-8 bytes
])
def test_regex_replace_all_is_gos(pattern: str, text: str, replacement: str, expected: str) -> None:
    assert kubemodlib.regex_replace_all(pattern, text, replacement) == expected


def test_regex_replace_all_refuses_what_re2_refuses() -> None:
    with pytest.raises(ValueError, match=r"regexReplaceAll: invalid regular expression '\(\?<=a\)b': invalid perl"):
        kubemodlib.regex_replace_all("(?<=a)b", "ab", "c")


def test_find_all_takes_gos_matches_and_limit() -> None:
    assert celext.find_all("baaac", "a*") == ["", "aaa", ""]
    assert celext.find_all("baaac", "a*", 2) == ["", "aaa"]
    assert celext.find("ünï 42", "[0-9]+") == "42"
