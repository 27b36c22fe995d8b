"""Patterns and texts of every kind through find, findAll and regexReplaceAll.

The functions rules call with a pattern (a policy's, or one read from the request) end in a
result or in an error naming the pattern; never in another exception, a crash, or a wait (RE2
is linear in the text).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.engine.evaluation import celext, kubemodlib

_PIECES = st.sampled_from(["a", "b", "é", ".", "*", "+", "?", "|", "(", ")", "[", "]", "{", "}", "{2,3}",
                           "^", "$", "\\", "\\d", "\\pL", "\\1", "(?=", "(?P<n>", "(?i)", "-", ",", "\x00",
                           "{1001}", "*+"])
PATTERNS = st.lists(_PIECES, max_size=12).map("".join) | st.text(max_size=12)
TEXTS = st.text(alphabet=st.sampled_from("aabé.-1 \n\x00"), max_size=40) | st.text(max_size=40)


@given(PATTERNS, TEXTS)
def test_regex_functions_answer_or_name_the_pattern(pattern: str, text: str) -> None:
    try:
        found = celext.find(text, pattern)
    except ValueError as e:
        assert str(e).startswith(f"Illegal regex {pattern!r}: "), str(e)
        for call in (lambda: celext.find_all(text, pattern), lambda: kubemodlib.regex_replace_all(pattern, text, "")):
            try:
                call()
            except ValueError as again:
                assert repr(pattern) in str(again)
            else:
                raise AssertionError(f"{pattern!r} refused by find only")
        return
    every = celext.find_all(text, pattern)
    assert all(isinstance(m, str) for m in every)
    assert celext.find_all(text, pattern, 1) == every[:1]
    assert found == (every[0] if every else "")
    assert kubemodlib.regex_replace_all(pattern, text, "${0}") == text  # every match replaced by itself
