"""Fixtures shared by the tests that talk to the control plane directly."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kinitiras_py.cluster import client
from tests.conftest import Cluster


@pytest.fixture
async def api(cluster: Cluster) -> AsyncIterator[Any]:
    """An API connection (cluster.client.Api) to the test cluster, closed afterwards."""
    api_client = await client.api_client(cluster.kubeconfig)
    try:
        yield api_client
    finally:
        await api_client.close()


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test module, deleted (without waiting) afterwards."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    name = f"{module[:20]}-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name, check=True)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")
