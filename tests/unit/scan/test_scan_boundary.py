"""The background scan reads every namespace (its informers list the selected kinds cluster-wide,
with the scan's RBAC), yet a namespaced policy still reads only its own namespace: the scan's
informers only feed objects to evaluate, never answer a rule's references, and every reference
goes through the same boundary as at admission (kinitiras_py/refs/scoped.py)."""

from __future__ import annotations

import copy

from prometheus_client import CollectorRegistry

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench.scanscale import Preloaded
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from tests.compiling import compile_all
from tests.scanfakes import MemorySink
from tests.unit.refs.test_boundary import SECRET_A, SECRET_B, RecordingStore, configmap, steal
from tests.unit.registration.test_rules import FakeCatalog
from tests.unit.scan.test_scanner import CONFIGMAPS, until


def labelled(name: str, namespace: str, source: str) -> Obj:
    """A ConfigMap of ``namespace`` whose label sends the policy's reference to ``source``."""
    return configmap(namespace, name=name, uid=f"uid-{name}", resourceVersion="1", labels={"from": source})


async def test_a_namespaced_policy_scanned_cluster_wide_reads_only_its_namespace() -> None:
    store = RecordingStore([SECRET_A, SECRET_B])
    sink = MemorySink()
    scanner = Scanner(None, sink, Context(store), FakeCatalog(), period=3600, cpu_share=1.0,
                      metrics=ScanMetrics(CollectorRegistry()), make_informer=Preloaded)
    policy = steal({"apiVersion": "v1", "kind": "Secret", "namespace": "{{metadata.labels.from}}", "name": "db"})
    try:
        await scanner.on_policy("OverridePolicy", "team-a", "steal", compile_all([policy])[0])
        await scanner.start()
        await until(lambda: CONFIGMAPS in scanner.feed.informers)
        objects = [labelled("inside", "team-a", "team-a"), labelled("leads-out", "team-a", "team-b"),
                   labelled("theirs", "team-b", "team-b")]
        for one in objects:  # the scan's informer holds both namespaces' ConfigMaps
            await scanner.feed.informers[CONFIGMAPS].apply({"type": "ADDED", "object": copy.deepcopy(one)})
        await until(lambda: len(sink.reports) == 3)
    finally:
        await scanner.stop()
    assert sink.results_of("inside") == {("steal", 0): "pass"}
    assert sink.reports["uid-inside"][1][0].message == "would change the object"
    assert sink.results_of("leads-out") == {("steal", 0): "error"}
    message = sink.reports["uid-leads-out"][1][0].message
    assert "Secret team-b/db is outside namespace 'team-a'" in message, message
    assert sink.results_of("theirs") == {}  # watched, but the policy applies in team-a only
    # Whatever the scan watches, the policy's reads reach the store only inside team-a.
    assert store.reads and {namespace for _, namespace, _ in store.reads} == {"team-a"}
