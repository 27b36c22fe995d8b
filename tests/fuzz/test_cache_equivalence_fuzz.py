"""Fuzz: every cache on gives the answer every cache off gives, byte for byte (issue 21).

Random sets of ClusterOverridePolicies run in a random order (their names are drawn in order):
CEL rules that read the node selector and the labels through optional and computed keys, loops
over maps, map results and conditions that change nothing; plaintext rules adding and removing
selector keys, labels and fields in random sequences; label and annotation templates; and
ClusterValidatePolicies auditing, warning about or denying what they read. Random Pods (the
node selector empty now and then). Explicit examples: the stale-copy shape of issue 21 (the
first reader writing what it read, and changing nothing), and loops over maps of 12 and 10 keys
(cel-cpp's own iteration order varies from 8 keys on; the order is the sorted keys').

Each review is answered through the webhook's handlers with every cache on (the CEL result
cache, the conversions kept across rules as the read record decides, the memory of mutations,
the remembered answers): first evaluated, then from the remembered answers, then from the
memory of mutations; and with every cache off (a change of the object keeps no conversion,
without asking the record). The mutated object is then validated twice with the caches on and
once off. Invariant: the same bytes (allowed, patch, warnings, audit annotations) but for the uid.

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

import jsonpatch
import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from kinitiras_py.admission import answers, pipeline, readrecord
from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.readrecord import ReadRecord
from kinitiras_py.base.bounded import Cache
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics
from tests.fuzz.test_answers_fuzz import answer, body, unnamed

WORDS = ["w1", "web", "x", "tier", "app", "é"]
KEYS = [*WORDS, *(f"k{i}" for i in range(8))]
"""Label keys: enough for maps of 8 and more keys, which cel-cpp iterates in a varying order."""
ZONE = 'object.spec.nodeSelector[?("zone-" + object.metadata.name)].orValue("none")'
READS = [  # what a CEL rule writes into its annotation
    ZONE,
    'object.?metadata.?labels[?"app"].orValue("-")',
    "string(size(object.spec.nodeSelector))",
    'object.metadata.labels[?object.metadata.name].orValue("-")',
    'object.metadata.labels.exists(k, k == "tier") ? "tier" : "no"',
    'has(object.spec.extra) ? string(object.spec.extra) : "no"',
    'object.spec.nodeSelector.map(k, k + "=" + object.spec.nodeSelector[k]).join(",")',
    'object.metadata.labels.filter(k, k != "x").join(",")',
    "object.spec.nodeSelector",
    "{'n': object.metadata.name, 'z': " + ZONE + ", 'l': object.metadata.labels}",
]
STRINGS = len(READS) - 2
"""The reads before this one give strings, those after it maps."""


def writes(n: int, annotation: str) -> dict[str, Any]:
    """A rule whose CEL writes ``READS[n]`` into ``annotation``."""
    value = READS[n]
    return {"overriders": {"cel": f'[{{"op": "add", "path": "/metadata/annotations/{annotation}", "value": {value}}}]'}}


def only_reads(n: int) -> dict[str, Any]:
    """A rule whose CEL reads ``READS[n]`` (a string) and changes nothing while that is "none"."""
    return {"overriders": {"cel": f'({READS[n]}) == "none" ? [] : '
                                  '[{"op": "add", "path": "/metadata/annotations/seen", "value": "yes"}]'}}


OPS = st.one_of(  # what a plaintext rule does
    st.builds(lambda w, v: {"op": "add", "path": f"/spec/nodeSelector/zone-{w}", "value": v},
              st.sampled_from(WORDS), st.sampled_from(WORDS)),
    st.builds(lambda w: {"op": "remove", "path": f"/spec/nodeSelector/zone-{w}"}, st.sampled_from(WORDS)),
    st.just({"op": "replace", "path": "/spec/nodeSelector", "value": {}}),
    st.builds(lambda k, v: {"op": "add", "path": f"/metadata/labels/{k}", "value": v},
              st.sampled_from(KEYS), st.sampled_from(WORDS)),
    st.builds(lambda v: {"op": "add", "path": "/spec/extra", "value": v}, st.sampled_from(WORDS)),
    st.just({"op": "remove", "path": "/spec/extra"}),
)
OVERRIDERS = st.one_of(
    st.builds(lambda n: writes(n, f"r{n}")["overriders"], st.integers(0, len(READS) - 1)),
    st.builds(lambda n: only_reads(n)["overriders"], st.integers(0, STRINGS - 1)),
    st.builds(lambda ops: {"plaintext": ops}, st.lists(OPS, min_size=1, max_size=3)),
    st.builds(lambda kind, k, v: {"template": {"type": kind, "operation": "add", "path": k, "value": {"string": v}}},
              st.sampled_from(["labels", "annotations"]), st.sampled_from(WORDS[:-1]), st.sampled_from(WORDS[:-1])),
)
RULE = st.fixed_dictionaries({"overriders": OVERRIDERS}, optional={"failurePolicy": st.sampled_from(["Ignore"])})
STALE = st.builds(  # issue 21's shape: a read (that writes what it read or changes nothing), a change, the same read
    lambda n, first, ops: [writes(n, f"r{n}") if first or n >= STRINGS else only_reads(n),
                           {"overriders": {"plaintext": ops}}, writes(n, f"s{n}")],
    st.integers(0, len(READS) - 1), st.booleans(), st.lists(OPS, min_size=1, max_size=2))
RULES = st.lists(st.one_of(RULE.map(lambda rule: [rule]), STALE), min_size=1, max_size=4).map(
    lambda blocks: [rule for block in blocks for rule in block])
"""Rules in the order they run: single ones and stale-copy shapes, mixed."""
CHECKS = st.fixed_dictionaries({  # a ClusterValidatePolicy's rule
    "cel": st.sampled_from([f"{ZONE} != 'x'", "size(object.spec.nodeSelector) < 2",
                            "object.metadata.labels.all(k, k != object.metadata.name)"]),
    "message": st.just("checked"),
    "validationActions": st.sampled_from([["Deny"], ["Audit"], ["Warn"], ["Audit", "Warn"]])})
SELECTORS = [{"apiVersion": "v1", "kind": "Pod"}]
PODS = st.builds(
    lambda name, labels, selector, extra: {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels, "annotations": {}},
        "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "i"}], **extra}},
    st.sampled_from(WORDS), st.dictionaries(st.sampled_from(KEYS), st.sampled_from(WORDS), max_size=12),
    st.dictionaries(st.sampled_from([f"zone-{w}" for w in KEYS]), st.sampled_from(WORDS), max_size=10),
    st.fixed_dictionaries({}, optional={"extra": st.sampled_from(WORDS)}))
STALE_COPY = ([writes(0, "r0"),
               {"overriders": {"plaintext": [{"op": "add", "path": "/spec/nodeSelector/zone-w1", "value": "eu"}]}},
               writes(0, "r1")],
              [],
              {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w1", "namespace": "team-a", "labels": {},
                                                               "annotations": {}},
               "spec": {"nodeSelector": {}, "containers": [{"name": "c", "image": "i"}]}})
"""Issue 21's shape: a reader through a computed key, a writer of that key, the same reader."""
STALE_COPY_READER_CHANGES_NOTHING = ([only_reads(0), *STALE_COPY[0][1:]], *STALE_COPY[1:])
"""The same, the first reader changing nothing (it reads "none")."""
MAP_ORDER = ([writes(6, "r6"), writes(7, "r7"), writes(9, "r9")],
             [{"cel": "object.metadata.labels.all(k, k != object.metadata.name)", "message": "checked",
               "validationActions": ["Warn"]}],
             {**STALE_COPY[2], "metadata": {"name": "w1", "namespace": "team-a", "annotations": {},
                                            "labels": {key: "x" for key in KEYS[:12]}},
              "spec": {"nodeSelector": {f"zone-{key}": "x" for key in KEYS[:10]},
                       "containers": [{"name": "c", "image": "i"}]}})
"""Loops over maps of 12 and 10 keys (cel-cpp's own order varies from 8 keys on)."""


def handlers_for(rules: list[dict[str, Any]], checks: list[dict[str, Any]]) -> Handlers:
    """The webhook's handlers over one policy per rule, run in the order given (by name)."""
    overrides = [compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
        "metadata": {"name": f"p{i:02d}"}, "spec": {"resourceSelectors": SELECTORS, "overrideRules": [rule]}})
        for i, rule in enumerate(rules)]
    validations = [compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
        "metadata": {"name": f"v{i:02d}"}, "spec": {"resourceSelectors": SELECTORS, "validateRules": [check]}})
        for i, check in enumerate(checks)]
    return Handlers(Engine([*overrides, *validations], store=StaticStore([])), Metrics())


def caches(engine: Engine) -> list[Cache[Any, Any]]:
    """Every cache ``engine`` keeps."""
    return [engine.cel_results, engine.mutations, engine.answers]


@contextlib.contextmanager
def caches_off(engine: Engine) -> Iterator[None]:
    """Every cache of ``engine`` off, the conversions kept across rules included (not a fixture:
    hypothesis runs many examples). A change keeps no conversion, whatever the read record says."""
    real = Bindings.changed

    def afresh(self: Bindings, name: str, value: Any, paths: list[tuple[str, ...]]) -> Bindings:
        return Bindings({**self.variables, name: value})

    Bindings.changed = afresh  # type: ignore[method-assign]
    sizes = [cache.max_bytes for cache in caches(engine)]
    for cache in caches(engine):
        cache.configure(0)
    try:
        yield
    finally:
        Bindings.changed = real  # type: ignore[method-assign]
        for cache, size in zip(caches(engine), sizes, strict=True):
            cache.configure(size)


def mutated(pod: dict[str, Any], out: bytes) -> dict[str, Any]:
    """``pod`` with the patch of the mutate answer ``out`` applied."""
    response = orjson.loads(out[:out.rindex(b"}") + 1])["response"]
    patch = orjson.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return jsonpatch.apply_patch(pod, patch)


def request(pod: dict[str, Any]) -> dict[str, Any]:
    return {"operation": "CREATE", "namespace": "team-a", "userInfo": {"username": "u"}, "dryRun": False,
            "object": pod}


@contextlib.contextmanager
def recorded(unknown_feature: bool = False) -> Iterator[list[ReadRecord]]:
    """Every read record the pipeline makes, in order; with ``unknown_feature``, the matched policies
    also claim a feature the record cannot describe (a new rule kind reading something), so every
    record must fail closed. Not a fixture: hypothesis runs many examples."""
    made: list[ReadRecord] = []

    class Recording(ReadRecord):
        def __post_init__(self) -> None:
            if unknown_feature:
                self.features |= readrecord.KNOWN_FEATURES + 1
            super().__post_init__()
            made.append(self)

    real = pipeline.ReadRecord
    pipeline.ReadRecord = Recording  # type: ignore[misc]
    try:
        yield made
    finally:
        pipeline.ReadRecord = real  # type: ignore[misc]


@given(rules=RULES, checks=st.lists(CHECKS, max_size=2), pod=PODS)
@example(*STALE_COPY)
@example(*STALE_COPY_READER_CHANGES_NOTHING)
@example(*MAP_ORDER)
def test_every_cache_on_gives_the_answer_every_cache_off_gives(rules: list[dict[str, Any]],
                                                              checks: list[dict[str, Any]],
                                                              pod: dict[str, Any]) -> None:
    handlers = handlers_for(rules, checks)
    engine = handlers.engine
    with recorded() as records:
        first = unnamed(answer(handlers, body("u-1", request(pod))), "u-1")
    # The remembered answers keep only what the records say depends on the request and the index alone.
    assert records or not rules
    assert all(r.alone for r in records) or len(engine.answers) == 0
    on = [first, unnamed(answer(handlers, body("u-2", request(pod))), "u-2")]
    engine.answers.configure(0)  # the third time from the memory of mutations
    on.append(unnamed(answer(handlers, body("u-3", request(pod))), "u-3"))
    engine.answers.configure(answers.DEFAULT_BYTES)
    final = mutated(pod, on[0])
    checked = [unnamed(answer(handlers, body(uid, request(final)), "validate"), uid) for uid in ("v-1", "v-2")]
    with caches_off(engine):
        off = unnamed(answer(handlers, body("u-4", request(pod))), "u-4")
        checked_off = unnamed(answer(handlers, body("v-3", request(final)), "validate"), "v-3")
    assert on == [off, off, off]
    assert checked == [checked_off, checked_off]



@given(rules=RULES, pod=PODS)
@example(STALE_COPY[0], STALE_COPY[2])
def test_an_input_the_record_cannot_describe_turns_every_cache_off(rules: list[dict[str, Any]],
                                                                   pod: dict[str, Any]) -> None:
    handlers = handlers_for(rules, [])
    engine = handlers.engine
    with caches_off(engine):
        off = unnamed(answer(handlers, body("u-0", request(pod))), "u-0")
    with recorded(unknown_feature=True) as records:
        on = [unnamed(answer(handlers, body(uid, request(pod))), uid) for uid in ("u-1", "u-2", "u-3")]
    assert on == [off, off, off]
    assert records and all(r.undescribed and not r.alone and not r.cacheable for r in records)
    assert all(r.conversions.kept_count == 0 for r in records)  # no conversion kept across a rule's change
    # Three equal requests, none answered from a memory (the memory of mutations still keeps which
    # rules a request matches: that depends on the request and the index alone).
    assert (engine.answers.hits, engine.mutations.hits, engine.cel_results.hits) == (0, 0, 0)
    assert (len(engine.answers), len(engine.cel_results)) == (0, 0)


def managed_fields(second: int) -> list[dict[str, Any]]:
    """managedFields as the API server writes them, stamped at ``second`` (two digits: every stamp
    has the same length, so only the stamp tells two of them apart)."""
    return [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
             "time": f"2026-11-27T14:00:{second:02d}Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}]


MANAGED_READ = {"overriders": {"cel": '[{"op": "add", "path": "/metadata/annotations/mf", '
                                      '"value": object.metadata.managedFields[0].time}]'}}
"""A rule reading the managedFields: the memory must keep them in its key."""
MANAGED_UNREAD = {"overriders": {"template": {"type": "labels", "operation": "add", "path": "app",
                                              "value": {"string": "web"}}}}
"""A rule that reads none of them: the memory may leave them out of its key."""
MANAGED_WRITTEN = {"overriders": {"cel": '[{"op": "replace", "path": "/metadata/managedFields", "value": '
                                         + orjson.dumps(managed_fields(1)).decode() + "}]"}}
"""A rule writing them without reading them: a patch only when they differ from what it writes."""
MANAGED_COPIED = {"overriders": {"cel": '[{"op": "copy", "from": "/metadata/managedFields/0/time", '
                                        '"path": "/metadata/annotations/copied"}]'}}
"""A rule whose operation reads them (its CEL does not)."""
MANAGED_TESTED = {"overriders": {"cel": '[{"op": "test", "path": "/metadata/managedFields/0/time", '
                                        '"value": "2026-11-27T14:00:01Z"}, '
                                        '{"op": "add", "path": "/metadata/annotations/tested", "value": "yes"}]'}}
"""A rule whose operations fail unless they hold one time (its CEL reads nothing)."""
MANAGED_RULES = st.sampled_from([MANAGED_READ, MANAGED_UNREAD, MANAGED_WRITTEN, MANAGED_COPIED, MANAGED_TESTED])


@given(rules=st.lists(st.one_of(MANAGED_RULES, RULE), min_size=1, max_size=3), pod=PODS,
       seconds=st.lists(st.integers(0, 59), min_size=2, max_size=3))
@example([MANAGED_UNREAD], STALE_COPY[2], [1, 2])
@example([MANAGED_READ], STALE_COPY[2], [1, 2])
@example([MANAGED_WRITTEN], STALE_COPY[2], [1, 2])
@example([MANAGED_UNREAD, MANAGED_READ], STALE_COPY[2], [1, 2])
@example([MANAGED_COPIED], STALE_COPY[2], [1, 2])
@example([MANAGED_TESTED], STALE_COPY[2], [1, 2])
def test_a_pod_differing_only_in_its_managed_fields_gets_the_answer_caches_off_give(
        rules: list[dict[str, Any]], pod: dict[str, Any], seconds: list[int]) -> None:
    handlers = handlers_for(rules, [])
    engine = handlers.engine
    pods = [{**pod, "metadata": {**pod["metadata"], "managedFields": managed_fields(s)}} for s in seconds]
    on = [unnamed(answer(handlers, body(f"u-{i}", request(p))), f"u-{i}") for i, p in enumerate(pods)]
    if rules == [MANAGED_UNREAD] and len(set(seconds)) == len(seconds):  # each Pod after the first: recalled
        assert engine.mutations.hits == len(seconds) - 1
    with caches_off(engine):
        off = [unnamed(answer(handlers, body(f"o-{i}", request(p))), f"o-{i}") for i, p in enumerate(pods)]
    assert on == off
