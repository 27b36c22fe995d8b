"""``bench --scale``: engine time per request as policies that do not match the Pod grow (10 → 10,000).

Unlike run 1 of ``bench``, whose fillers target other kinds and namespaces (which the index
buckets skip), most fillers here select Pods in the Pod's own scope, by a name, a label or a
label value the Pod does not have: policies of the same kind that only their selectors rule out.
"""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import runner, workload

SIZES = (10, 10_000)
LABEL = "bench.kinitiras-py/scale"
"""Set on every policy of this workload, so a cluster run can delete them all by label."""


def _pod_selector(i: int) -> Obj:
    selector: Obj = {"apiVersion": "v1", "kind": "Pod"}
    variant = i % 3
    if variant == 0:
        selector["labelSelector"] = {"matchLabels": {"app": f"other-{i}"}}
    elif variant == 1:
        selector["name"] = f"web-{i}"
    else:
        selector["labelSelector"] = {"matchExpressions": [{"key": "tier", "operator": "In",
                                                           "values": [f"tier-{i}", f"tier-{i}b"]}]}
    return selector


def filler(i: int) -> Obj:
    """A policy that cannot match the benchmark Pod; cluster-scoped, or in the Pod's namespace.

    One in five targets another kind (override or validate); the rest select Pods the
    benchmark Pod is not: ClusterOverridePolicies, OverridePolicies in its namespace and
    ClusterValidatePolicies.
    """
    variant = i % 5
    # workload.filler_policy(j): j % 3 == 1 is a ClusterOverridePolicy, == 2 a ClusterValidatePolicy.
    policy = workload.filler_policy(3 * i + (2 if variant in (1, 4) else 1))
    policy["metadata"] = {"name": f"scale-{i:05d}", "labels": {LABEL: "filler"}}
    if variant >= 2:
        policy["spec"]["resourceSelectors"] = [_pod_selector(i)]
    if variant == 3:
        policy["kind"] = "OverridePolicy"
        policy["metadata"]["namespace"] = workload.NAMESPACE
    return policy


def policies(total: int) -> list[Obj]:
    """``total`` policies: the one matching the benchmark Pod, then ``total - 1`` fillers."""
    matching = workload.matching_policy(0)
    matching["metadata"]["labels"] = {LABEL: "matching"}
    return [matching, *(filler(i) for i in range(1, total))]


def run(sizes: Sequence[int], requests: int, warmup: int) -> list[runner.Stats]:
    """Time the Pod's CREATE with each policy count (batches interleaved, see ``runner.run``)."""
    return runner.run([runner.Setup(policies(n), 1) for n in sizes], workload.pod(), requests, warmup)


def main(sizes: Sequence[int], requests: int, output: str) -> int:
    """``bench --scale``: the table (or JSON) and the largest:smallest median ratio."""
    import platform
    import sys

    import orjson

    from kinitiras_py import __version__
    from kinitiras_py.bench import report

    if output == "table":
        print(f"kinitiras-py {__version__} bench --scale: Python {platform.python_version()}; one matching "
              f"OverridePolicy, the rest for Pods of other names and labels or for other kinds; "
              f"{requests} requests per count, batches interleaved", flush=True)
    stats = run(sizes, requests, max(1, requests // 10))
    if output == "table":
        print(report.index_table(stats))
    else:
        sys.stdout.write(orjson.dumps(report.as_json({"scale": stats}), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
