"""How long callers wait for the JavaScript threads: a fine script is never refused because its
thread was busy or the CPU was shared, and no caller waits past its deadline.

A thread is kept busy deterministically by queueing a sleep on it (holding the thread as a
runaway script or a descheduled one would, without needing a loaded machine)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kinitiras_py.api.javascript import JavaScript
from kinitiras_py.api.schema import parse
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.engine.evaluation import jsruntime
from kinitiras_py.engine.rules import jsrules

OK = "function jsa_mutate(obj) { return {Result: obj} }"
NAMES = (jsrules.MUTATE, jsrules.VALIDATE, *jsrules.HOOKS)


@pytest.fixture(autouse=True)
def threads_idle() -> Iterator[None]:
    """Every JavaScript thread idle after each test, so later tests do not queue behind this one's sleeps."""
    yield
    for pool in list(jsruntime._pools):
        pool.submit(lambda: None).result()


def occupy(script: jsruntime.Script, seconds: float) -> None:
    """Keep ``script``'s thread busy for ``seconds`` of wall time, from now."""
    script.queue(time.sleep, seconds)


def compile_js(source: str, **limits: Any) -> jsrules.JsProgram:
    program = jsrules.compile_javascript(parse(JavaScript, {"source": source, **limits}), jsrules.MUTATE,
                                         "javascript", "p")
    assert program is not None
    return program


def test_a_script_queued_behind_a_busy_thread_is_not_failed() -> None:
    script = jsruntime.Script(OK, timeout_ms=100)  # waits 0.6 s once started
    script.load(NAMES)
    occupy(script, 0.8)
    obj = {"apiVersion": "v1", "kind": "Pod"}
    assert script.call(jsrules.MUTATE, [obj]) == {"Result": obj}


def test_loading_at_admission_waits_beyond_the_cpu_limit_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # A load that takes longer in wall time than its CPU limit plus GRACE (its thread descheduled
    # on a busy machine) is still a sound policy: it must be admitted, not refused.
    load = jsruntime.Script._load

    def descheduled(self: jsruntime.Script) -> Any:
        time.sleep(1.2)  # past the 0.6 s (100 ms + 0.5 s of grace) it was once given
        return load(self)

    monkeypatch.setattr(jsruntime.Script, "_load", descheduled)
    assert compile_js(OK, timeoutMs=100).script.types[jsrules.MUTATE] == "function"


def test_loading_behind_a_busy_thread_is_admitted() -> None:
    program = compile_js(OK, timeoutMs=100)
    again = jsruntime.Script(OK, timeout_ms=100)
    again._thread = program.script._thread  # the same thread, on purpose
    occupy(again, 1.2)
    again.load(NAMES)
    assert again.types[jsrules.MUTATE] == "function"


def test_a_request_deadline_bounds_the_wait_for_a_busy_thread() -> None:
    script = jsruntime.Script(OK)
    script.load(NAMES)
    occupy(script, 1.5)
    started = time.monotonic()
    with pytest.raises(jsruntime.JsError) as e:
        script.call(jsrules.MUTATE, [{}], time_limit=0.2)
    assert time.monotonic() - started < 1.0  # the busy thread frees itself after 1.5 s
    assert "could not start in time" in e.value.reason


def test_the_admission_deadline_bounds_loading_a_runaway_top_level() -> None:
    # quickjs counts the process' CPU time: the load's own limit would spend 0.5 s of it, the
    # deadline about 0.2 s (less on a loaded machine, which stretches wall time instead).
    started = time.process_time()
    with jsrules.request_deadline(0.2), pytest.raises(PolicyError) as e:
        compile_js("while (true) {}\nfunction jsa_mutate() {}", timeoutMs=2000)
    assert time.process_time() - started < 0.45
    assert e.value.path == "javascript.source" and "limit" in e.value.reason


def test_the_admission_deadline_bounds_loading_behind_a_busy_thread() -> None:
    program = compile_js(OK)
    occupy(program.script, 1.5)
    late = jsruntime.Script(OK)
    late._thread = program.script._thread  # the same thread, on purpose
    started = time.monotonic()
    with pytest.raises(jsruntime.JsError) as e:
        late.load(NAMES, until=time.monotonic() + 0.2)
    assert time.monotonic() - started < 1.0  # the busy thread frees itself after 1.5 s
    assert "could not start in time" in e.value.reason
