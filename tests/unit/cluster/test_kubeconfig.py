"""Kubeconfig and in-cluster loading: servers, TLS material, every kind of credential, merging."""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.certs.authority import new_ca, new_serving
from kinitiras_py.cluster import kubeconfig
from kinitiras_py.cluster.kubeconfig import ConfigError, ExecPlugin, StaticCredentials, TokenFile


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None, *, name: str = "c",
           current: str | None = "c") -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster or {"server": f"https://{name}.example:6443/"}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_token_server_and_ca_data(tmp_path: Path) -> None:
    ca = new_ca()
    path = _write(tmp_path / "config", {"token": "abc"},
                  {"server": "https://k.example:6443/", "certificate-authority-data": _b64(ca.cert),
                   "tls-server-name": "kubernetes", "proxy-url": "http://proxy:3128"})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert conn.server == "https://k.example:6443"
    assert await conn.credentials.header() == "Bearer abc"
    assert conn.ssl is not None and conn.ssl.verify_mode == ssl.CERT_REQUIRED
    assert len(conn.ssl.get_ca_certs()) == 1
    assert (conn.tls_server_name, conn.proxy) == ("kubernetes", "http://proxy:3128")


async def test_client_certificate_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    ca = new_ca()
    client = new_serving(ca, ["admin"])
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(ca.cert)
    (tmp_path / "pki" / "admin.crt").write_bytes(client.cert)
    (tmp_path / "pki" / "admin.key").write_bytes(client.key)
    path = _write(tmp_path / "config", {"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"},
                  {"server": "https://k:6443", "certificate-authority": "pki/ca.crt"})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert await conn.credentials.header() is None
    assert conn.ssl is not None and len(conn.ssl.get_ca_certs()) == 1


async def test_client_certificate_data_and_insecure(tmp_path: Path) -> None:
    client = new_serving(new_ca(), ["admin"])
    path = _write(tmp_path / "config", {"client-certificate-data": _b64(client.cert),
                                        "client-key-data": _b64(client.key)},
                  {"server": "https://k:6443", "insecure-skip-tls-verify": True})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert conn.ssl is not None and conn.ssl.verify_mode == ssl.CERT_NONE and not conn.ssl.check_hostname
    bad = _write(tmp_path / "bad", {"client-certificate-data": _b64(b"nope"), "client-key-data": _b64(b"nope")})
    with pytest.raises(ConfigError, match="client certificate"):
        await kubeconfig.from_kubeconfig([str(bad)])


async def test_plain_http_basic_auth_and_token_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "config", {"username": "u", "password": "p"}, {"server": "http://127.0.0.1:8080"})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert conn.ssl is None and await conn.credentials.header() == f"Basic {_b64(b'u:p')}"
    (tmp_path / "tok").write_text("from-file\n")
    path = _write(tmp_path / "config2", {"tokenFile": "tok"})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert isinstance(conn.credentials, TokenFile) and await conn.credentials.header() == "Bearer from-file"


async def test_token_file_is_read_again_after_its_period_and_keeps_a_token_while_empty(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    creds = TokenFile(token, period=0)
    assert await creds.header() == "Bearer one"
    token.write_text("two")
    assert await creds.header() == "Bearer two"
    token.write_text("")  # the kubelet replaces the file: an empty moment keeps the last token
    assert await creds.header() == "Bearer two"
    with pytest.raises(ConfigError, match="empty"):
        await TokenFile(token).header()


async def test_merging_first_file_wins_and_context_choice(tmp_path: Path) -> None:
    first = _write(tmp_path / "a", {"token": "a"}, name="a", current="a")
    second = _write(tmp_path / "b", {"token": "b"}, name="b", current="b")
    conn = await kubeconfig.from_kubeconfig([str(tmp_path / "missing"), str(first), str(second)])
    assert conn.server == "https://a.example:6443"
    conn = await kubeconfig.from_kubeconfig([str(first), str(second)], context="b")
    assert await conn.credentials.header() == "Bearer b"
    with pytest.raises(ConfigError, match="'nope'"):
        await kubeconfig.from_kubeconfig([str(first)], context="nope")
    with pytest.raises(ConfigError, match="no current context"):
        await kubeconfig.from_kubeconfig([str(_write(tmp_path / "c", {}, current=None))])
    with pytest.raises(ConfigError, match="no kubeconfig"):
        await kubeconfig.from_kubeconfig([str(tmp_path / "missing")])


async def test_load_prefers_the_service_account_without_a_kubeconfig(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "config", {"token": "kc"})
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert (await kubeconfig.load(None)).server == "https://c.example:6443"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with pytest.raises(ConfigError):  # no service account mounted here
        await kubeconfig.load(None)
    assert (await kubeconfig.load(str(path))).server == "https://c.example:6443"


async def test_in_cluster(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(new_ca().cert)
    (tmp_path / "token").write_text("sa-token")
    conn = kubeconfig.in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path)
    assert conn.server == "https://[fd00::1]:443"
    assert await conn.credentials.header() == "Bearer sa-token"
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_PORT"):
        kubeconfig.in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, tmp_path)


def _plugin(tmp_path: Path, status: dict[str, Any], exit_code: int = 0) -> Path:
    """A credential plugin that counts its runs in ``runs`` and prints ``status``."""
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, sys\n"
        f"open({str(tmp_path / 'runs')!r}, 'a').write(os.environ['KUBERNETES_EXEC_INFO'] + '\\n')\n"
        f"print(json.dumps({{'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
        f"'status': {status!r}}}))\n"
        f"sys.stderr.write('plugin says no')\nsys.exit({exit_code})\n")
    return script


def _runs(tmp_path: Path) -> int:
    return len((tmp_path / "runs").read_text().splitlines()) if (tmp_path / "runs").exists() else 0


async def test_exec_plugin_token_is_renewed_when_expired_or_refused(tmp_path: Path) -> None:
    expired = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    script = _plugin(tmp_path, {"token": "t1", "expirationTimestamp": expired})
    path = _write(tmp_path / "config", {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                 "command": sys.executable, "args": [str(script)],
                                                 "env": [{"name": "X", "value": "1"}]}})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert isinstance(conn.credentials, ExecPlugin) and _runs(tmp_path) == 1
    assert await conn.credentials.header() == "Bearer t1"
    assert _runs(tmp_path) == 2  # expired: run again
    assert '"kind":"ExecCredential"' in (tmp_path / "runs").read_text()
    never = _plugin(tmp_path, {"token": "t2"})
    plugin = ExecPlugin(sys.executable, [str(never)])
    assert await plugin.header() == "Bearer t2" and await plugin.header() == "Bearer t2"
    runs = _runs(tmp_path)
    plugin.invalidate()
    await plugin.header()
    assert _runs(tmp_path) == runs + 1


async def test_exec_plugin_client_certificate_and_failures(tmp_path: Path) -> None:
    client = new_serving(new_ca(), ["admin"])
    script = _plugin(tmp_path, {"clientCertificateData": client.cert.decode(), "clientKeyData": client.key.decode()})
    path = _write(tmp_path / "config", {"exec": {"command": sys.executable, "args": [str(script)]}})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert conn.ssl is not None
    failing = _plugin(tmp_path, {}, exit_code=3)
    with pytest.raises(ConfigError, match="plugin says no"):
        await ExecPlugin(sys.executable, [str(failing)]).run()
    with pytest.raises(ConfigError, match="exec plugin"):
        await ExecPlugin(str(tmp_path / "does-not-exist")).run()


async def test_static_credentials() -> None:
    assert await StaticCredentials().header() is None


async def test_an_auth_provider_user_is_loaded_by_kubernetes_asyncio(tmp_path: Path) -> None:
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    exp = int((dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).timestamp())
    id_token = f"{part({'alg': 'none'})}.{part({'exp': exp, 'sub': 'me'})}.sig"
    path = _write(tmp_path / "config", {"auth-provider": {"name": "oidc", "config": {
        "client-id": "kubernetes", "id-token": id_token, "idp-issuer-url": "https://issuer.example"}}})
    conn = await kubeconfig.from_kubeconfig([str(path)])
    assert conn.server == "https://c.example:6443"
    assert await conn.credentials.header() == f"Bearer {id_token}"


@pytest.mark.parametrize(("text", "problem"), [
    ("clusters: 5\n", "clusters must be a list, not int"),
    ("a: [\n", "not YAML"),
    ("users: [{name: u, user: oops}]\n", "users[0].user must be a mapping, not str"),
    ("contexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: https://h, "
     "certificate-authority: 5}}]\ncurrent-context: c\n", "No such file"),
])
async def test_a_bad_kubeconfig_is_a_config_error_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text(text)
    with pytest.raises(ConfigError) as error:
        await kubeconfig.load(str(bad))
    assert str(bad) in str(error.value) and problem in str(error.value)
