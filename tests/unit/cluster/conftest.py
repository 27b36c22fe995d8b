"""A scripted fake of ``cluster.client.Transport`` for informer, store, mapper and status tests."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest

from kinitiras_py.cluster.client import ApiException

END = object()
"""In a watch script: the server ends the stream here."""
HANG = object()
"""In a watch script: the stream stays open without events (also the default after a script)."""


def api_error(status: int, reason: str = "") -> ApiException:
    return ApiException(status=status, reason=reason or f"status {status}")


class FakeApi:
    """Answers requests from ``routes`` and watches from ``watches`` (one script per watch call).

    A route value is an Obj, an exception, None (404), a callable ``(query, body) -> value``, or a
    list of those consumed one per request (the last one repeats).
    """

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}
        self.delays: dict[tuple[str, str], float] = {}
        self.requests: list[dict[str, Any]] = []
        self.watches: list[list[Any]] = []
        self.watch_calls: list[dict[str, str]] = []
        self.open_watches = 0
        self.closed_watches = 0

    def route(self, method: str, path: str, value: Any) -> None:
        self.routes[(method, path)] = value

    async def request(self, method: str, path: str, *, query: Any = (), body: Any = None,
                      content_type: str = "application/json", timeout: float | None = None) -> Any:
        self.requests.append({"method": method, "path": path, "query": dict(query), "body": body,
                              "content_type": content_type, "timeout": timeout})
        await asyncio.sleep(self.delays.get((method, path), 0))
        value = self.routes.get((method, path), api_error(404, "no route"))
        if isinstance(value, list):
            value = value.pop(0) if len(value) > 1 else value[0]
        if callable(value):
            value = value(dict(query), body)
        if isinstance(value, BaseException):
            raise value
        if value is None:
            raise api_error(404, "not found")
        return copy.deepcopy(value)

    async def watch(self, path: str, query: Any = (), timeout: float | None = None) -> AsyncGenerator[Any, None]:
        self.watch_calls.append({"path": path, **dict(query)})
        script = self.watches.pop(0) if self.watches else [HANG]
        self.open_watches += 1
        try:
            for item in script:
                await asyncio.sleep(0)
                if item is END:
                    return
                if item is HANG:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield copy.deepcopy(item)
            await asyncio.Event().wait()
        finally:
            self.open_watches -= 1
            self.closed_watches += 1


@pytest.fixture
def fake() -> FakeApi:
    return FakeApi()


def cm(name: str, rv: str, namespace: str = "ns", **data: str) -> dict[str, Any]:
    """A ConfigMap as a watch event or GET carries it."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, "data": data}


def page(items: list[dict[str, Any]], rv: str, cont: str = "") -> dict[str, Any]:
    """A list page; items lose apiVersion and kind as in a real list."""
    stripped = [{k: v for k, v in i.items() if k not in ("apiVersion", "kind")} for i in items]
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"apiVersion": "v1", "kind": "ConfigMapList", "metadata": meta, "items": stripped}


async def eventually(check: Callable[[], object], within: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.001)
