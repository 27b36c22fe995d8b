"""What kinitiras' templates render, as our compiler reads it: the template contract (``data``) and
the one rendered program refused (resourcesOversell); the rest, and the same programs as `cue`
rules (where `data` is not given), are checked against real CUE in test_differential."""

from __future__ import annotations

import pytest

from kinitiras_py.base.errors import CelCompileError, PolicyErrors
from kinitiras_py.engine.cue import compile_cue
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.policies.compiling import compile_policy
from tests.cue import harness
from tests.cue.corpus_templates import DEPLOY_LIMITS, OVERSELL, POD, TEMPLATE_CASES

_BY_NAME = {c.name: c for c in TEMPLATE_CASES}


def test_oversell_is_refused_when_compiled() -> None:
    """Long paths inside nested calls compile deeper than CEL's parser takes: refused at admission."""
    with pytest.raises(CelCompileError, match="recursion"):
        cel.compile_program(compile_cue(OVERSELL.program, OVERSELL.kind, template=True))


def test_oversell_as_a_cue_rule_is_refused_naming_the_nesting() -> None:
    program = OVERSELL.program.replace("data:      _ @tag(data)\nobject:    data.object\n", "object: _ @tag(object)\n")
    policy = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "o"},
              "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                       "overrideRules": [{"overriders": {"cue": program}}]}}
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(policy)
    (error,) = caught.value.errors
    assert error.path == "spec.overrideRules[0].overriders.cue"
    assert error.reason.startswith("CUE nested too deeply to compile"), error.reason


def test_template_contract_reads_object_old_object_and_params() -> None:
    case = _BY_NAME["tmpl-annotations-ref-owner"]
    assert harness.ours(case, POD) == [{"op": "replace", "path": "/metadata/annotations/deployment-name",
                                        "value": "web"}]
    removed = harness.ours(_BY_NAME["tmpl-resources-remove"], DEPLOY_LIMITS)
    assert [p["path"].rsplit("/", 1)[1] for p in removed] == ["cpu", "memory"]
