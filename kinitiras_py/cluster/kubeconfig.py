"""Where the API server is and how to authenticate: from a kubeconfig or the pod's service account.

This replaces ``kubernetes_asyncio``'s loaders on the serving path: importing any part of that
package loads every generated API and model class (about 37 MiB of a process that otherwise needs
about 70). Supported: ``server``, ``certificate-authority(-data)``, ``insecure-skip-tls-verify``,
``tls-server-name``, ``proxy-url``; users with ``client-certificate(-data)``/``client-key(-data)``,
``token``, ``tokenFile`` (re-read every minute, as client-go does), ``exec`` credential plugins
(run again when their token expires or the server answers 401) and ``username``/``password``.
Only a user with an ``auth-provider`` (oidc, and the gcp/azure providers kubectl dropped) is
handed to ``kubernetes_asyncio``, imported for that case alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from kinitiras_py.base.errors import KinitirasError

__all__ = ["ConfigError", "Connection", "Credentials", "ExecPlugin", "StaticCredentials", "TokenFile",
           "from_kubeconfig", "in_cluster", "load"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_PERIOD = 60.0
"""Seconds a token read from a file is used before the file is read again (rotated tokens)."""
EXEC_TIMEOUT = 60.0
EXEC_MARGIN = 10.0
"""Seconds before its expiry an exec plugin's token is replaced."""


class ConfigError(KinitirasError):
    """The kubeconfig or the in-cluster environment does not say how to reach the API server."""


class Credentials(Protocol):
    """What the Authorization header of the next request is."""

    async def header(self) -> str | None:
        """The header value (``Bearer ...``, ``Basic ...``), or None for none."""

    def invalidate(self) -> None:
        """The server answered 401: fetch fresh credentials before the next request."""


@dataclass(frozen=True)
class StaticCredentials:
    """A fixed header (a kubeconfig ``token`` or ``username``/``password``), or no header at all."""

    value: str | None = None

    async def header(self) -> str | None:
        """The fixed value."""
        return self.value

    def invalidate(self) -> None:
        """Nothing to refresh."""


class TokenFile:
    """A bearer token read from a file, read again after ``period`` seconds or a 401."""

    def __init__(self, path: str | Path, period: float = TOKEN_PERIOD) -> None:
        self.path = Path(path)
        self.period = period
        self._token = ""
        self._read_at = -float("inf")

    async def header(self) -> str | None:
        """``Bearer <file content>``; the last good token while the file is briefly empty."""
        if time.monotonic() - self._read_at >= self.period:
            token = self.path.read_text().strip()
            if token:
                self._token = token
            elif not self._token:
                raise ConfigError(f"token file {self.path} is empty")
            self._read_at = time.monotonic()
        return f"Bearer {self._token}"

    def invalidate(self) -> None:
        """Read the file again on the next request."""
        self._read_at = -float("inf")


@dataclass
class ExecPlugin:
    """A client-go credential plugin (``users[].user.exec``): a command printing an ExecCredential."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    _token: str | None = None
    _expires: float | None = None

    async def run(self) -> dict[str, Any]:
        """Run the command and return the ExecCredential's ``status``."""
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": orjson.dumps(info).decode()}
        try:
            proc = await asyncio.create_subprocess_exec(
                self.command, *self.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as e:
            raise ConfigError(f"exec plugin {self.command}: {e}") from None
        try:
            async with asyncio.timeout(EXEC_TIMEOUT):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ConfigError(f"exec plugin {self.command} gave no answer within {EXEC_TIMEOUT:g} s") from None
        if proc.returncode != 0:
            raise ConfigError(f"exec plugin {self.command} failed ({proc.returncode}): "
                              f"{err.decode(errors='replace').strip()[:500]}")
        try:
            status = orjson.loads(out).get("status")
        except (orjson.JSONDecodeError, AttributeError):
            status = None
        if not isinstance(status, dict):
            raise ConfigError(f"exec plugin {self.command} printed no ExecCredential with a status")
        return status

    async def header(self) -> str | None:
        """``Bearer <token>``, running the plugin first when there is none or it has expired."""
        if self._token is None or (self._expires is not None and time.time() >= self._expires - EXEC_MARGIN):
            status = await self.run()
            token = status.get("token")
            if not isinstance(token, str) or not token:
                return None  # the plugin gives a client certificate instead
            self._token = token
            self._expires = _timestamp(status.get("expirationTimestamp"))
        return f"Bearer {self._token}"

    def invalidate(self) -> None:
        """Run the plugin again on the next request."""
        self._token = None


@dataclass
class Connection:
    """Everything a request to the API server needs besides its path."""

    server: str
    ssl: ssl.SSLContext | None = None
    """None for a plain-HTTP server."""
    credentials: Credentials = field(default_factory=StaticCredentials)
    tls_server_name: str | None = None
    proxy: str | None = None


async def load(kubeconfig: str | None, context: str | None = None) -> Connection:
    """The connection from ``kubeconfig`` when given; else in-cluster when running in a pod
    (``KUBERNETES_SERVICE_HOST`` is set); else from ``$KUBECONFIG`` or ``~/.kube/config``."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    paths = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    files = [p for p in paths.split(os.pathsep) if p]
    try:
        return await from_kubeconfig(files, context)
    except (OSError, ValueError, TypeError, AttributeError, ssl.SSLError) as e:
        # An unreadable file, or a value of the wrong type deep inside (args: 5, a CA path that is a
        # number...): name the kubeconfig and the problem rather than the line of our code it reached.
        raise ConfigError(f"kubeconfig {os.pathsep.join(files)}: {e}") from None


def in_cluster(environ: Mapping[str, str] = os.environ, account: Path = SERVICE_ACCOUNT) -> Connection:
    """The connection of a pod: the service host and port, the mounted CA and the rotating token."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set in a cluster")
    ca, token = account / "ca.crt", account / "token"
    for path in (ca, token):
        if not path.is_file():
            raise ConfigError(f"not running with a service account: {path} does not exist")
    host = f"[{host}]" if ":" in host else host
    return Connection(f"https://{host}:{port}", ssl.create_default_context(cafile=str(ca)), TokenFile(token))


@dataclass(frozen=True)
class _Entry:
    """A named kubeconfig entry and the directory its relative paths start from."""

    value: dict[str, Any]
    base: Path


def _merge(paths: list[str]) -> tuple[dict[str, dict[str, _Entry]], str]:
    """Named clusters, users and contexts of all files, and the current context.

    As kubectl merges ``$KUBECONFIG``: the first file that defines a name, or sets
    ``current-context``, wins.
    """
    merged: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    found = False
    for path in paths:
        file = Path(path).expanduser()
        if not file.is_file():
            continue
        found = True
        try:
            doc = yaml.safe_load(file.read_text()) or {}
        except (yaml.YAMLError, RecursionError) as e:
            raise ConfigError(f"{file}: not YAML: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{file}: not a kubeconfig")
        current = current or str(doc.get("current-context") or "")
        for section, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            items = doc.get(section) or []
            if not isinstance(items, list):
                raise ConfigError(f"{file}: {section} must be a list, not {type(items).__name__}")
            for i, item in enumerate(items):
                if not isinstance(item, dict) or item.get("name") is None:
                    continue
                value = item.get(inner) or {}
                if not isinstance(value, dict):
                    raise ConfigError(f"{file}: {section}[{i}].{inner} must be a mapping, not {type(value).__name__}")
                merged[section].setdefault(str(item["name"]), _Entry(value, file.parent))
    if not found:
        raise ConfigError(f"no kubeconfig found at {os.pathsep.join(paths) or '(none)'}")
    return merged, current


async def from_kubeconfig(paths: list[str], context: str | None = None) -> Connection:
    """The connection of ``context`` (default: the current context) in the merged kubeconfig files."""
    merged, current = _merge(paths)
    name = context or current
    if not name or name not in merged["contexts"]:
        raise ConfigError(f"context {name!r} is not in the kubeconfig" if name
                          else "the kubeconfig has no current context")
    ctx = merged["contexts"][name].value
    cluster = merged["clusters"].get(str(ctx.get("cluster") or ""))
    if cluster is None or not cluster.value.get("server"):
        raise ConfigError(f"context {name!r}: cluster {ctx.get('cluster')!r} with a server is not in the kubeconfig")
    user = merged["users"].get(str(ctx.get("user") or ""), _Entry({}, cluster.base))
    if user.value.get("auth-provider"):
        return await _auth_provider(paths, name)
    server = str(cluster.value["server"]).rstrip("/")
    tls = None
    credentials: Credentials = StaticCredentials()
    exec_status: dict[str, Any] = {}
    if isinstance(user.value.get("exec"), dict):
        plugin = _exec_plugin(user.value["exec"], user.base)
        exec_status = await plugin.run()
        credentials = plugin
        if exec_status.get("token"):
            plugin._token = str(exec_status["token"])
            plugin._expires = _timestamp(exec_status.get("expirationTimestamp"))
    elif user.value.get("token") or user.value.get("tokenFile"):
        credentials = (StaticCredentials(f"Bearer {user.value['token']}") if user.value.get("token")
                       else TokenFile(user.base / str(user.value["tokenFile"])))
    elif user.value.get("username") is not None and user.value.get("password") is not None:
        basic = base64.b64encode(f"{user.value['username']}:{user.value['password']}".encode()).decode()
        credentials = StaticCredentials(f"Basic {basic}")
    if server.startswith("https"):
        tls = _tls(cluster, user, exec_status)
    return Connection(server, tls, credentials, cluster.value.get("tls-server-name") or None,
                      cluster.value.get("proxy-url") or None)


def _exec_plugin(spec: dict[str, Any], base: Path) -> ExecPlugin:
    command = str(spec.get("command") or "")
    if not command:
        raise ConfigError("exec plugin without a command")
    if os.sep in command and not os.path.isabs(command):
        command = str(base / command)  # as client-go: relative to the kubeconfig's directory
    env = {str(e.get("name")): str(e.get("value", "")) for e in spec.get("env") or [] if isinstance(e, dict)}
    return ExecPlugin(command, [str(a) for a in spec.get("args") or []], env,
                      str(spec.get("apiVersion") or "client.authentication.k8s.io/v1"))


def _tls(cluster: _Entry, user: _Entry, exec_status: dict[str, Any]) -> ssl.SSLContext:
    ca_data = cluster.value.get("certificate-authority-data")
    ca_file = cluster.value.get("certificate-authority")
    context = ssl.create_default_context(
        cafile=str(cluster.base / str(ca_file)) if ca_file and not ca_data else None,
        cadata=_decode(ca_data, "certificate-authority-data").decode() if ca_data else None)
    if cluster.value.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if exec_status.get("clientCertificateData"):
        _load_chain(context, str(exec_status["clientCertificateData"]).encode(),
                    str(exec_status.get("clientKeyData") or "").encode())
    elif user.value.get("client-certificate-data"):
        _load_chain(context, _decode(user.value["client-certificate-data"], "client-certificate-data"),
                    _decode(user.value.get("client-key-data") or "", "client-key-data"))
    elif user.value.get("client-certificate"):
        key = user.value.get("client-key")
        context.load_cert_chain(str(user.base / str(user.value["client-certificate"])),
                                str(user.base / str(key)) if key else None)
    return context


def _load_chain(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl loads client certificates from files only: write them to a private directory, load, remove.
    with tempfile.TemporaryDirectory(prefix="kinitiras-py-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_path.write_bytes(cert)
        key_path.write_bytes(key)
        try:
            context.load_cert_chain(str(cert_path), str(key_path) if key else None)
        except ssl.SSLError as e:
            raise ConfigError(f"the client certificate or key does not load: {e}") from None


def _decode(value: Any, name: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=False)
    except ValueError:
        raise ConfigError(f"{name} is not base64") from None


def _timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time, None when there is none."""
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    raise ConfigError(f"exec plugin: expirationTimestamp {value!r} is not an RFC 3339 time")


async def _auth_provider(paths: list[str], context: str) -> Connection:
    """A user with an ``auth-provider``: kubernetes_asyncio loads it (importing all its models)."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import load_kube_config

    configuration = Configuration()
    await load_kube_config(config_file=os.pathsep.join(paths), context=context,
                           client_configuration=configuration, persist_config=False)
    server = str(configuration.host).rstrip("/")
    tls = None
    if server.startswith("https"):
        tls = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.cert_file:
            tls.load_cert_chain(configuration.cert_file, configuration.key_file)
        if not configuration.verify_ssl:
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
    token = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    return Connection(server, tls, StaticCredentials(str(token) if token else None),
                      getattr(configuration, "tls_server_name", None), configuration.proxy or None)
