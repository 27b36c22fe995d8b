"""Regular expressions on request data run on RE2, matched as Go's regexp matches."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.evaluation import celext, kubemodlib
from kinitiras_py.engine.policies.compiling import compile_policy


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


LAZY = """
import sys
from kinitiras_py.runtime import running
from kinitiras_py.engine.evaluation import cel
cel.compile_program("'a1'.startsWith(params.p)").evaluate({"params": {"p": "a"}})
print("re2" in sys.modules)
cel.compile_program("'a1'.find(params.p)").evaluate({"params": {"p": "[0-9]"}})
print("re2" in sys.modules)
"""


def test_re2_is_loaded_by_the_first_pattern_only() -> None:
    # About 1 MiB a process without such rules does not carry (the memory target is 128 MiB).
    done = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "True"]


NAMED = "object.metadata.name.find('(?<=web)-.*') == '' ? [] : []"


def test_a_policy_with_a_pattern_re2_refuses_is_refused_naming_the_rule() -> None:
    policy = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
              "metadata": {"name": "p"},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                       "overrideRules": [{"overriders": {"cel": "[]"}},
                                         {"overriders": {"cel": NAMED}}]}}
    with pytest.raises(PolicyErrors) as refused:
        compile_policy(policy)
    error = refused.value.errors[0]
    assert error.path == "spec.overrideRules[1].overriders.cel"
    assert "find: the pattern '(?<=web)-.*' is not a regular expression RE2" in error.reason
