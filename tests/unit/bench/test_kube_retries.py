"""The end-to-end benchmark's API calls: an overloaded server's answers are retried for idempotent
calls only, and what fails in the end is a BenchError the CLI reports without a traceback."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator

import pytest
from aiohttp import web

from kinitiras_py.base.errors import BenchError
from kinitiras_py.bench import kube
from kinitiras_py.cli import bench as bench_cli
from kinitiras_py.cli import main as cli


async def _serve(statuses: list[int], seen: list[str]) -> tuple[web.AppRunner, str]:
    answers: Iterator[int] = iter(statuses)

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.method)
        status = next(answers)
        return web.json_response({"code": status}, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def _call(method: str, statuses: list[int], tries: int = 3) -> tuple[object, list[str]]:
    seen: list[str] = []
    runner, url = await _serve(statuses, seen)
    client = kube.Kube(kube.Access(url, ssl.create_default_context(), "Bearer x", "-"), tries=tries, backoff=0.01)
    try:
        return await client.call(method, "/api/v1/namespaces/b/pods", ok=(200, 404)), seen
    except BenchError as e:
        return e, seen
    finally:
        await client.close()
        await runner.cleanup()


def test_a_delete_the_overloaded_server_timed_out_is_tried_again() -> None:
    answer, seen = asyncio.run(_call("DELETE", [504, 503, 200]))
    assert answer == {"code": 200} and seen == ["DELETE"] * 3


def test_an_overloaded_server_that_never_recovers_ends_in_a_bench_error_naming_the_tries() -> None:
    answer, seen = asyncio.run(_call("GET", [504, 504, 504, 200]))
    assert isinstance(answer, BenchError) and "HTTP 504 after 3 tries" in str(answer) and len(seen) == 3


def test_a_create_is_not_repeated_and_a_refusal_is_not_retried() -> None:
    created, seen = asyncio.run(_call("POST", [504, 200]))
    assert isinstance(created, BenchError) and seen == ["POST"]
    refused, seen = asyncio.run(_call("GET", [403, 200]))
    assert isinstance(refused, BenchError) and "HTTP 403:" in str(refused) and seen == ["GET"]


def test_the_cli_reports_a_bench_error_without_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    def fail(_args: object) -> int:
        raise BenchError("DELETE /api/v1/namespaces/b/pods: HTTP 504 after 5 tries: b'...'")

    monkeypatch.setattr(bench_cli, "_bench_e2e", fail)
    assert cli.main(["bench", "--e2e"]) == 2
    err = capsys.readouterr().err
    assert "kinitiras-py bench: DELETE /api/v1/namespaces/b/pods: HTTP 504 after 5 tries" in err
    assert "Traceback" not in err
