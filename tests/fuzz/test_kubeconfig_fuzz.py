"""Fuzz: kubeconfig files damaged at every path, read the way ``serve --kubeconfig`` reads them.

Invariant: reading gives a connection or a :class:`ConfigError` (which ``serve`` prints as one
line, exit 2); never another exception. Exec plugins are left out: a damaged command must not
run anything on the machine.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.cluster.kubeconfig import ConfigError, Connection, load
from tests.jsonpaths import json_paths

CA = base64.b64encode(b"not a certificate").decode()
BASE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Config", "current-context": "dev",
    "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:6443",
                                               "certificate-authority-data": CA, "tls-server-name": "api"}},
                 {"name": "plain", "cluster": {"server": "http://127.0.0.1:8080", "proxy-url": "http://p:3128"}}],
    "users": [{"name": "admin", "user": {"token": "t", "username": "u", "password": "p",
                                         "client-certificate-data": CA, "client-key-data": CA}},
              {"name": "files", "user": {"tokenFile": "token", "client-certificate": "c.crt"}}],
    "contexts": [{"name": "dev", "context": {"cluster": "plain", "user": "admin"}},
                 {"name": "tls", "context": {"cluster": "local", "user": "files"}}],
}

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=20), st.sampled_from(["", "~", "dev", "local", "https://", "-1"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)


PATHS = json_paths(BASE)


def _container(doc: Any, path: tuple[Any, ...]) -> Any:
    """The dict or list holding ``path``'s last part in ``doc`` (earlier damage may have moved it), or None."""
    parent = doc
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return None
    key = path[-1]
    if isinstance(parent, dict) and key in parent:
        return parent
    if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        return parent
    return None


@st.composite
def damaged(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent = _container(doc, path)
        if parent is None:
            continue
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
    if draw(st.integers(0, 9)) == 0:
        doc = draw(values)
    return doc


@given(doc=damaged(), context=st.sampled_from([None, "dev", "tls", "missing"]))
def test_a_damaged_kubeconfig_is_a_connection_or_a_config_error(tmp_path_factory: Any, doc: Any,
                                                                context: str | None) -> None:
    folder: Path = tmp_path_factory.mktemp("kc")
    (folder / "token").write_text("file-token")
    file = folder / "config"
    file.write_text(yaml.safe_dump(doc))
    try:
        connection = asyncio.run(load(str(file), context))
    except ConfigError as e:
        assert str(e)
    else:
        assert isinstance(connection, Connection)
        assert connection.server


def test_the_undamaged_kubeconfig_reads() -> None:
    """The base document itself is good: the damage, not the base, makes the errors above."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "config"
        file.write_text(yaml.safe_dump(BASE))
        connection = asyncio.run(load(str(file)))
    assert connection.server == "http://127.0.0.1:8080"
    assert connection.proxy == "http://p:3128"
