"""``apply --namespace`` against the object's own metadata.namespace, as the API server treats them:
a mismatch is refused, a missing namespace is filled in from the request."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import run

POLICY = """\
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: team, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
    - overriders:
        template: {type: labels, operation: add, path: team, value: {string: a}}
"""


def pod(namespace: str | None) -> str:
    meta = {"name": "web"} | ({"namespace": namespace} if namespace else {})
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                       "spec": {"containers": [{"name": "app", "image": "nginx"}]}})


def apply(tmp_path: Path, resource: str, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "pod.yaml").write_text(resource)
    return run("apply", "--policy", tmp_path / "policy.yaml", "--resource", tmp_path / "pod.yaml",
               "-o", "json", *extra)


def test_a_namespace_other_than_the_objects_own_is_refused(tmp_path: Path) -> None:
    code, out, err = apply(tmp_path, pod("team-b"), "--namespace", "team-a")
    assert (code, out) == (2, "")
    assert "namespace of the resource ('team-b')" in err and "--namespace 'team-a'" in err, err


def test_an_object_without_namespace_gets_the_requests(tmp_path: Path) -> None:
    code, out, err = apply(tmp_path, pod(None), "--namespace", "team-a")
    assert code == 0, err
    result = json.loads(out)
    # team-a's policy applies, and the namespace itself is no change of the webhook's
    assert result["patch"] == [{"op": "add", "path": "/metadata/labels", "value": {"team": "a"}}]
    assert result["object"]["metadata"]["namespace"] == "team-a"


def test_an_object_without_metadata_gets_the_requests_namespace(tmp_path: Path) -> None:
    code, out, err = apply(tmp_path, json.dumps({"apiVersion": "v1", "kind": "Pod"}), "--namespace", "team-a")
    assert code == 0, err
    assert json.loads(out)["object"]["metadata"] == {"namespace": "team-a", "labels": {"team": "a"}}


def test_an_equal_namespace_is_what_the_object_says(tmp_path: Path) -> None:
    with_flag = apply(tmp_path, pod("team-a"), "--namespace", "team-a")
    assert with_flag == apply(tmp_path, pod("team-a"))
    assert json.loads(with_flag[1])["patch"], "team-a's policy applies"


def test_an_old_object_in_another_namespace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(pod("team-b"))
    code, out, err = apply(tmp_path, pod(None), "--namespace", "team-a", "--operation", "UPDATE",
                           "--old-resource", str(tmp_path / "old.yaml"))
    assert (code, out) == (2, "")
    assert "namespace of the old resource ('team-b')" in err, err


def test_without_the_flag_the_objects_namespace_is_the_requests(tmp_path: Path) -> None:
    code, out, _ = apply(tmp_path, pod("team-b"))
    assert code == 0
    assert json.loads(out)["patch"] == [], "team-a's policy does not apply in team-b"
