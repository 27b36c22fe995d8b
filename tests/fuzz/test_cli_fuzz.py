"""Fuzz: random YAML documents against ``kinitiras-py render``, ``apply`` and ``test``.

Invariant: the command returns 0, 1 or 2 (2 with an ``error:`` line on stderr) and never lets an
exception out. The CLI runs in-process through ``main()`` with captured stdio (fast); a few
runs go through a real process to check that stderr holds no traceback.

Documents come from three sources: JSON values written as YAML in every style, YAML assembled
from the tokens that have broken readers (tags, anchors, keys YAML reads as non-strings, deep
nesting, odd bytes), and valid policies and objects mutated character by character.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinitiras_py.offline import loader, testcases
from tests.cli import run

DATA = Path(__file__).resolve().parents[1] / "data"
POLICY_TEXTS = [p.read_text() for p in sorted((DATA / "examples").rglob("*.yaml"))]
FOREIGN_TEXTS = [p.read_text() for p in sorted((DATA / "foreign").rglob("*.yaml"))] or POLICY_TEXTS
"""Documents of other admission systems (PodPreset, Mesh, ModRule, JsAdmission) that convert reads."""
RESOURCE_TEXTS = [p.read_text() for p in sorted((DATA / "cases").rglob("*.yaml"))
                  if p.name != "kinitiras-test.yaml" and "kind:" in p.read_text()][:40]
APPMESH = DATA.parent.parent / "examples" / "appmesh"
SIDECAR_POLICY = (APPMESH / "policy.yaml").read_text()
SIDECAR_CONTEXT = [(APPMESH / "configmap.yaml").read_text()]
"""A policy whose sidecar template is read from a ConfigMap, and that ConfigMap (``--context``)."""

SCALARS = ["off", "on", "y", "n", "~", "null", "1", "0x1F", "0o12", "012", "1e3", "1_000", ".inf", "-.nan",
           "2024-01-01", "2024-01-01T10:00:00Z", "1:20", "'quoted'", '"dq"', "true", "a b", "é", "\\x00",
           "!!binary aGVsbG8=", "!!set {a, b}", "!!str 1", "!!int '7'", "!!int", "!!float", "!!float x", "!foo x",
           "!!python/object:os.system ''", "&a 1", "*a", "*nope", "<<", "|\n  block", ">-\n  folded",
           "[", "]", "{", "}", "- ", "? ", ": ", "#c", "%YAML 1.2", "---", "...", "\t", "12345678901234567890123"]
KEYS = ["off", "1", "~", "2024-01-01", "y", "apiVersion", "kind", "metadata", "name", "labels", "spec",
        "params", "header", "value", "stringMap", "[a]", "{a: 1}", "<<", "? x", "!!binary aGk="]


def check(code: int, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    if code == 2 and err.startswith("usage: "):  # argparse's usage error (an option given twice)
        assert ": error: " in err.rstrip("\n").splitlines()[-1], err
    elif code == 2:  # an error line, after the notes of documents left out on purpose (if any)
        notes = err.split("error: ", 1)[0]
        assert "error: " in err and all(line.startswith("note: ") for line in notes.splitlines()), err


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10) | st.sampled_from(SCALARS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | st.sampled_from(KEYS),
                                                                inner, max_size=4),
    max_leaves=25,
)


@st.composite
def json_as_yaml(draw: st.DrawFn) -> bytes:
    value = draw(JSON)
    style = draw(st.sampled_from([None, False, True]))
    text = yaml.safe_dump(value, default_flow_style=style, allow_unicode=draw(st.booleans()))
    return text.encode()


@st.composite
def token_yaml(draw: st.DrawFn) -> bytes:
    """YAML put together from troublesome pieces, nested by indentation and flow brackets."""
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        indent = "  " * draw(st.integers(0, 3))
        key = draw(st.sampled_from(KEYS))
        value = draw(st.sampled_from(SCALARS) | st.text(max_size=6))
        lines.append(f"{indent}{draw(st.sampled_from(['', '- ']))}{key}: {value}")
    text = "\n".join(lines) + "\n"
    depth = draw(st.sampled_from([0, 0, 0, 50, 199, 201, 3000]))
    if depth:
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        text += "deep: " + opener * depth + "1" + closer * draw(st.sampled_from([depth, 0])) + "\n"
    data = text.encode()
    if draw(st.integers(0, 9)) == 0:
        data += draw(st.sampled_from([b"\xff", b"\xc3", b"\xef\xbb\xbf", b"\x00", b"\xed\xa0\x80"]))
    return data


@st.composite
def mutated(draw: st.DrawFn, texts: list[str]) -> bytes:
    """A valid document with a few characters or lines replaced, inserted or removed."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(SCALARS + KEYS + ["\n", ":", " ", "  ", "-", "'", '"']) | st.text(max_size=3))
        cut = draw(st.integers(0, 4))
        text = text[:at] + piece + text[at + cut:]
    return text.encode("utf-8", "surrogatepass")


DOCUMENTS = st.one_of(json_as_yaml(), token_yaml(), mutated(POLICY_TEXTS), mutated(FOREIGN_TEXTS))


@given(DOCUMENTS)
def test_render_never_crashes(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.yaml"
        policy.write_bytes(document)
        check(*run("render", str(policy), usage_exit=True)[::2])
        check(*run("render", "--cel", str(policy), usage_exit=True)[::2])


@given(st.one_of(DOCUMENTS, st.sampled_from(FOREIGN_TEXTS).map(str.encode)))
def test_convert_never_crashes(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "foreign.yaml"
        path.write_bytes(document)
        code, out, err = run("convert", str(path), usage_exit=True)
        check(code, err)
        if code == 0:
            assert all(isinstance(doc, dict) for doc in yaml.safe_load_all(out) if doc is not None)


HTTP_RESPONSE = """kind: HTTPResponse
url: https://teams.example/api
method: GET
params: {ns: team-a}
header: {Content-Type: application/json}
body: {team: payments}
"""


@given(policy=st.one_of(DOCUMENTS, st.sampled_from(POLICY_TEXTS + FOREIGN_TEXTS).map(str.encode)),
       resource=st.one_of(DOCUMENTS, mutated(RESOURCE_TEXTS), st.sampled_from(RESOURCE_TEXTS).map(str.encode)),
       context=st.one_of(DOCUMENTS, mutated([HTTP_RESPONSE, *RESOURCE_TEXTS])),
       operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
       output=st.sampled_from(["yaml", "json"]),
       namespace=st.none() | st.sampled_from(["", "team-a", "default", "a b", "-", "x" * 300]) | st.text(max_size=8))
def test_apply_never_crashes(policy: bytes, resource: bytes, context: bytes, operation: str, output: str,
                             namespace: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.yaml" for name in ("policy", "resource", "context")}
        files["policy"].write_bytes(policy)
        files["resource"].write_bytes(resource)
        files["context"].write_bytes(context)
        args = ["apply", "--policy", str(files["policy"]), "--resource", str(files["resource"]),
                "--context", str(files["context"]), "--operation", operation, "-o", output]
        if operation == "UPDATE":
            args += ["--old-resource", str(files["resource"])]
        if namespace is not None:
            args += [f"--namespace={namespace}"]
        code, out, err = run(*args, usage_exit=True)
        check(code, err)
        if code in (0, 1) and output == "yaml":  # one document per object (a file may hold several)
            assert all(isinstance(doc, dict) for doc in yaml.safe_load_all(out))


@given(policy=st.one_of(st.just(SIDECAR_POLICY.encode()), mutated([SIDECAR_POLICY])),
       context=st.one_of(DOCUMENTS, mutated(SIDECAR_CONTEXT), st.just(SIDECAR_CONTEXT[0].encode())),
       resource=st.one_of(st.just((APPMESH / "pod.yaml").read_bytes()), mutated([(APPMESH / "pod.yaml").read_text()])))
def test_sidecar_templates_from_context_never_crash(policy: bytes, context: bytes, resource: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.yaml" for name in ("policy", "context", "resource")}
        for name, data in (("policy", policy), ("context", context), ("resource", resource)):
            files[name].write_bytes(data)
        check(*run("render", "--cel", str(files["policy"]), "--context", str(files["context"]), usage_exit=True)[::2])
        check(*run("apply", "--policy", str(files["policy"]), "--resource", str(files["resource"]),
                   "--context", str(files["context"]), usage_exit=True)[::2])


@settings(max_examples=500)
@given(DOCUMENTS)
@example(b"off: off\n\xef\xbb\xbf")  # a byte order mark at a line's start: libyaml skips it
@example(b"a: 1\n\xef\xbb\xbfb: 2\n")
def test_the_c_and_pure_yaml_loaders_agree(document: bytes) -> None:
    """Both loaders give the same values, or both refuse; except that libyaml (like go-yaml, its
    port, which kubectl uses) reads a tab where YAML allows white space, which PyYAML's own
    scanner refuses."""
    try:
        text = document.decode("utf-8-sig")
    except UnicodeDecodeError:
        return
    found: list[tuple[str, object]] = []
    for reader in (loader.LOADER, loader._Loader):
        try:
            found.append(("ok", loader.parse_yaml(text, "f.yaml", reader)))
        except loader.InputError as e:
            found.append(("refused", str(e)))
    (c, c_value), (pure, pure_value) = found
    if (c, pure) == ("ok", "refused"):
        assert "found character '\\t' that cannot start any token" in str(pure_value), (text, pure_value)
    elif "refused" in (c, pure):
        assert c == pure, (text, c_value, pure_value)
    else:
        assert c_value == pure_value, text


SINGLE_VALUED = [["--operation", "CREATE"], ["--namespace", "team-a"], ["-o", "json"], ["--output", "yaml"],
                 ["--results", "-"]]


@settings(max_examples=60)
@given(policy=st.one_of(DOCUMENTS, st.sampled_from(POLICY_TEXTS).map(str.encode)),
       resources=st.lists(st.one_of(DOCUMENTS, st.sampled_from(RESOURCE_TEXTS).map(str.encode)), min_size=1,
                          max_size=4),
       joined=st.booleans(), directory=st.booleans(),
       olds=st.lists(st.one_of(DOCUMENTS, st.sampled_from(RESOURCE_TEXTS).map(str.encode)), max_size=3),
       operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
       options=st.lists(st.sampled_from(SINGLE_VALUED), max_size=3),
       results=st.sampled_from([None, "-", "file"]), report=st.sampled_from([None, "-", "file", "nowhere"]))
def test_apply_on_many_objects_never_crashes(policy: bytes, resources: list[bytes], joined: bool, directory: bool,
                                             olds: list[bytes], operation: str, options: list[list[str]],
                                             results: str | None, report: str | None) -> None:
    """Several --resource files, one multi-document file or a directory; old resources paired by
    identity; single-valued options repeated (a usage error), results written as JSON and as
    PolicyReports (to stdout, a file, or a directory that does not exist)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "policy.yaml").write_bytes(policy)
        (root / "objects").mkdir()
        if joined:
            (root / "objects" / "all.yaml").write_bytes(b"\n---\n".join(resources))
        else:
            for i, data in enumerate(resources):
                (root / "objects" / f"{i}.yaml").write_bytes(data)
        given = [root / "objects"] if directory else sorted((root / "objects").iterdir())
        args = ["apply", "--policy", str(root / "policy.yaml"), "--operation", operation]
        for path in given:
            args += ["--resource", str(path)]
        for i, data in enumerate(olds):
            (root / f"old{i}.yaml").write_bytes(data)
            args += ["--old-resource", str(root / f"old{i}.yaml")]
        for option in options:
            args += option
        if results is not None:
            args += ["--results", "-" if results == "-" else str(root / "results.json")]
        if report is not None:
            target = {"-": "-", "file": str(root / "reports.yaml"), "nowhere": str(root / "no" / "r.yaml")}[report]
            args += ["--policy-report", target]
        code, out, err = run(*args, usage_exit=True)
        check(code, err)
        if code in (0, 1) and results is not None and report != "-":
            written = out if results == "-" else (root / "results.json").read_text()
            assert set(orjson.loads(written)) == {"objects", "policies", "totals"}
        if code in (0, 1) and report in ("-", "file") and results != "-":
            written = out if report == "-" else (root / "reports.yaml").read_text()
            for doc in yaml.safe_load_all(written):
                assert doc["kind"] in ("PolicyReport", "ClusterPolicyReport") and doc["results"], doc


RESULT_VALUES = ["pass", "fail", "warn", "error", "skip", "failed", "", 0, None]
TEST_KEYS = sorted(testcases.FILE_KEYS | testcases.CASE_KEYS | testcases.EXPECT_KEYS | testcases.RULE_KEYS)
TEST_VALUES = st.one_of(JSON, st.sampled_from(["policy.yaml", "resource.yaml", "missing.yaml", "CREATE", "UPDATE",
                                               *RESULT_VALUES]), st.integers(-1, 3))


@st.composite
def kinitiras_test_files(draw: st.DrawFn) -> bytes:
    """A kinitiras-test.yaml assembled from every key the format knows (and misspellings), any values."""
    def mapping(keys: list[str]) -> dict[str, Any]:
        return {key: draw(TEST_VALUES) for key in draw(st.lists(st.sampled_from(keys), max_size=5, unique=True))}

    rules = [{**mapping(sorted(testcases.RULE_KEYS)), "result": draw(st.sampled_from(RESULT_VALUES))}
             for _ in range(draw(st.integers(0, 2)))]
    expect = {**mapping([*sorted(testcases.EXPECT_KEYS), "alowed"]), **({"rules": rules} if rules else {})}
    case = {**mapping(sorted(testcases.CASE_KEYS)), "resource": "resource.yaml", "expect": expect}
    spec = {**mapping([*sorted(testcases.FILE_KEYS), "polices"]), "policies": ["policy.yaml"], "cases": [case]}
    if draw(st.booleans()):
        spec = draw(st.sampled_from([spec, {"cases": []}, {"cases": [case], "x": 1}, [spec], "text"]))
    text = yaml.safe_dump(spec, default_flow_style=draw(st.sampled_from([None, False, True])))
    return draw(st.one_of(st.just(text.encode()), mutated([text])))


@settings(max_examples=60)
@given(test_file=st.one_of(kinitiras_test_files(), DOCUMENTS), policy=st.sampled_from(POLICY_TEXTS),
       resource=st.sampled_from(RESOURCE_TEXTS), junit=st.sampled_from([None, "-", "file"]),
       as_json=st.sampled_from([None, "-", "file"]))
def test_test_command_never_crashes(test_file: bytes, policy: str, resource: str, junit: str | None,
                                    as_json: str | None) -> None:
    """Every key of the test file format with any value, and the JUnit and JSON outputs."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "kinitiras-test.yaml").write_bytes(test_file)
        (root / "policy.yaml").write_text(policy)
        (root / "resource.yaml").write_text(resource)
        args = ["test", str(root)]
        if junit:
            args += ["--junit", "-" if junit == "-" else str(root / "junit.xml")]
        if as_json:
            args += ["--json", "-" if as_json == "-" else str(root / "out.json")]
        code, out, err = run(*args, usage_exit=True)
        check(code, err)
        if code in (0, 1) and junit:
            written = out if junit == "-" else (root / "junit.xml").read_text()
            assert ET.fromstring(written).tag == "testsuites"
        if code in (0, 1) and as_json:
            written = out if as_json == "-" else (root / "out.json").read_text()
            assert set(orjson.loads(written)) == {"cases", "totals"}


SUBPROCESS_INPUTS: list[Any] = [
    b"metadata:\n  labels:\n    off: a\n    1: b\n    ~: c\n",
    b"a: !!binary aGVsbG8=\n",
    b"a: \xff\xfe\n",
    b"a: " + b"[" * 3000 + b"]" * 3000 + b"\n",
    b"a: &a [*a]\n",
]


@settings(max_examples=len(SUBPROCESS_INPUTS))
@given(st.sampled_from(SUBPROCESS_INPUTS))
def test_a_real_process_prints_no_traceback(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "doc.yaml"
        path.write_bytes(document)
        for args in (["render", str(path)], ["apply", "--policy", str(path), "--resource", str(path)],
                     ["convert", str(path)]):
            proc = subprocess.run([sys.executable, "-m", "kinitiras_py", *args], capture_output=True, timeout=120,
                                  check=False)
            assert proc.returncode in (0, 1, 2)
            assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
