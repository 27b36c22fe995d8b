"""The JavaScript sandbox: quickjs-ng contexts with a time and a memory limit, on our own threads.

A quickjs context is bound to the thread that created it (it records that thread's stack; used
from another thread it reports a stack overflow on every call), and the request path may run
rules on the event loop or in a worker thread. So each script is given one of :data:`THREADS`
dedicated threads when it is made, and its context is created, called and re-created only there;
callers wait for it. Scripts on different threads run side by side (quickjs lets go of the GIL),
and a script that runs to its limit holds up only the scripts that share its thread. Scripts with
watch hooks move to threads of their own kind (:data:`WATCH_THREADS`) once loaded.

A context has no file, network, timer or process access: quickjs-ng gives none unless the
embedder adds it, and we add only js-admissions-controller's logging functions, which collect
lines in the context (``setTimeout``, ``require``, ``fetch``, ``process`` are undefined;
``queueMicrotask`` queues jobs we never run).

Values cross as JSON text, parsed and printed *inside* the timed call by a function captured
before the user's code runs: a result's getters and ``toJSON`` methods run under the time limit,
and a script cannot replace the conversion (quickjs' own ``Object.json()`` runs without one).

The time limit is quickjs' interrupt check, which measures the process' CPU time since the call
began: a script may be stopped sooner than its limit when other threads are busy, and later in
wall time when the machine is. That limit is what bounds a script. Callers wait for it until their
deadline (a request's, shared by its scripts and by loading a policy's scripts at admission), and
without one (offline) for at most :data:`WAIT` seconds; a call not started by then is dropped, one
running is left to its interrupt. A wall-time bound near the CPU-time limit would be a proxy that
breaks when the CPU is shared: sound policies refused, sound rules failing, on a busy machine.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import quickjs

from kinitiras_py.api.javascript import DEFAULT_MEMORY_MIB, DEFAULT_TIMEOUT_MS
from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import JSON

WAIT = 10.0
"""Seconds of wall time a caller without a deadline (offline) waits for its call, queueing behind
other scripts on its thread included: a few times the longest CPU-time limit (2 s), for a busy
machine."""
_STACK_BYTES = 8 * 1024 * 1024  # the thread's C stack; quickjs stops JS recursion at 1 MiB
_MIB = 1024 * 1024
_T = TypeVar("_T")
LOG_LINES = 20
"""Most lines one call may log; further ones are counted as one notice."""
LOG_CHARS = 2000
_CALL = r"""(() => {
  const parse = JSON.parse, stringify = JSON.stringify, freeze = Object.freeze, lines = [];
  const text = (v) => { if (typeof v === "string") return v; try { return stringify(v) ?? String(v); }
                        catch { return String(v); } };
  const joined = (args) => args.map(text).join(" ");
  const format = (fmt, args) => {
    let i = 0;
    const out = String(fmt).replace(/%[a-z%]/g, (m) => m === "%%" ? "%" : i < args.length ? text(args[i++]) : m);
    return i < args.length ? out + " " + joined(args.slice(i)) : out;
  };
  const frozen = (root) => {  // a loop, not recursion: deep state must not overflow the stack
    const todo = [root];
    while (todo.length) {
      const v = todo.pop();
      if (v !== null && typeof v === "object") { freeze(v); for (const k in v) todo.push(v[k]); }
    }
    return root;
  };
  const emit = (level, line) => { if (lines.length <= LIMIT) lines.push([level, line.slice(0, CHARS)]); };
  globalThis.jsa_log = (...args) => { emit("info", joined(args)); };
  globalThis.jsa_logf = (fmt, ...args) => { emit("info", format(fmt, args)); };
  globalThis.jsa_debug = (...args) => { emit("debug", joined(args)); };
  globalThis.jsa_debugf = (fmt, ...args) => { emit("debug", format(fmt, args)); };
  return function (fn, input, state, at, keep) {
    lines.length = 0;
    const args = parse(input);
    const value = at >= 0 ? parse(state) : undefined;
    if (at >= 0) args[at] = keep ? value : frozen(value);
    const out = stringify([fn(...args), lines]);  // one flat string (the binding reads no ropes)
    if (!keep) return out;
    const kept = stringify(value);
    if (typeof kept !== "string") throw new TypeError("the state has no JSON form");
    return [out, kept].join("\u0001");  // flat, unlike +; JSON text never holds a raw control character
  };
})()""".replace("LIMIT", str(LOG_LINES)).replace("CHARS", str(LOG_CHARS))
"""Calls a function with arguments given as a JSON array; returns ``[result, log lines]`` as JSON
text. Defines js-admissions-controller's logging utilities (``jsa_log``, ``jsa_logf``,
``jsa_debug``, ``jsa_debugf``): quickjs may not call into Python under a time limit, so their
lines travel back with the result and are written to our log then. The state, as JSON text, is
put at argument ``at`` (when not negative): deep-frozen, or (``keep``) writable and returned
after the result, separated by U+0001 (the binding ends a string at a NUL)."""
log = logging.getLogger("kinitiras_py.javascript")
_WHERE = re.compile(r"<input>:(\d+)")
_FRAME = re.compile(r"\(<input>:(\d+)")  # a stack frame of the script (a bare location may be a JSON text's)


class JsError(KinitirasError):
    """A script failed: it threw, ran out of time or memory, or returned what JSON cannot hold."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class JsLoadError(JsError):
    """The script cannot be loaded; ``line`` is where (1-based), when quickjs says."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.line = line
        super().__init__(reason)


class State:
    """A script's ``state`` between calls, as JSON text: read and written only on the script's
    JavaScript thread, inside a call, so that calls see and leave it whole, one after the other."""

    def __init__(self, limit: int) -> None:
        self.text = "{}"
        self.limit = limit
        """Most characters the text may have."""
        self.ready = False
        """Set once jsa_init and the replay of existing objects have run."""
        self.problem: str | None = None
        """Why calls that bind the state fail (set for good: a new policy version starts afresh)."""


@dataclass(frozen=True)
class Binding:
    """How a call sees the state: at which argument, whether it may change it, and whether it runs
    while the state is being built (jsa_init and the replay of existing objects)."""

    state: State
    at: int
    writable: bool
    early: bool = False


LOAD_LIMIT = 0.5
"""Seconds a script's top level may run when it is loaded (at most its own limit): loading happens
when a policy is admitted, inside that request's deadline."""
THREADS = 4
"""Threads that run scripts; each script always runs on the same one."""
WATCH_THREADS = 2
"""Further threads for scripts with watch hooks (:meth:`Script.watch`): replaying and following
objects keeps them busy, and scripts of other rules must not wait behind that."""
_lock = threading.Lock()
_pools: list[concurrent.futures.ThreadPoolExecutor] = []
_assigned = itertools.count()
_watch_assigned = itertools.count()


def _executor(index: int) -> concurrent.futures.ThreadPoolExecutor:
    """JavaScript thread ``index``, made with a large stack on first use."""
    with _lock:
        while len(_pools) <= index:
            old = threading.stack_size()
            try:
                threading.stack_size(_STACK_BYTES)
                pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="javascript")
                pool.submit(lambda: None).result()  # the thread starts now, with this stack size
            finally:
                threading.stack_size(old)
            _pools.append(pool)
        return _pools[index]


def on_js_thread(index: int, fn: Callable[..., _T], *args: Any, until: float | None = None) -> _T:
    """Run ``fn(*args)`` on JavaScript thread ``index``, waiting until ``until`` (a finite
    :func:`time.monotonic` instant; by default :data:`WAIT` seconds from now): JsError past it."""
    started = threading.Event()

    def timed() -> _T:
        started.set()
        return fn(*args)

    end = time.monotonic() + WAIT if until is None else until
    future = _executor(index).submit(timed)
    try:
        return future.result(timeout=max(end - time.monotonic(), 0.001))
    except concurrent.futures.TimeoutError:
        if not started.is_set() and future.cancel():
            raise JsError("the script could not start in time: scripts before it on its thread are still "
                          "running") from None
        raise JsError("the script did not finish in time (its deadline passed before its time limit stopped "
                      "it)") from None


def describe_error(error: Exception, where: bool = True) -> str:
    """A quickjs exception as one line: the message and (``where``) the line it was raised at."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    if isinstance(error, quickjs.StackOverflow):
        return "the script recursed too deeply (stack overflow)"
    if first.startswith("InternalError: interrupted"):
        return "interrupted"
    if "out of memory" in first:
        return "out of memory"
    line = line_of(text)
    if where and line is not None:
        first += f" (line {line})"
    return first


def line_of(text: str) -> int | None:
    """The script line a quickjs error's trace points at: its innermost frame, else its location."""
    found = _FRAME.search(text) or _WHERE.search(text)
    return int(found.group(1)) if found else None


class Script:
    """One script, loaded once into its own context; called by function name.

    Contexts are touched only on the JavaScript thread. After a script is interrupted or runs
    out of memory its context is dropped and the next call loads the source afresh, so a
    half-finished call leaves nothing behind.
    """

    def __init__(self, source: str, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 memory_mib: int = DEFAULT_MEMORY_MIB, name: str = "") -> None:
        self.source = source
        self.name = name
        """Who the script belongs to, for its log lines (a policy and rule)."""
        self._thread = next(_assigned) % THREADS
        self.timeout = timeout_ms / 1000
        self.memory = memory_mib * _MIB
        self._context: quickjs.Context | None = None
        self._call: quickjs.Object | None = None
        self.types: dict[str, str] = {}
        """``typeof`` of each global named in :meth:`load`'s ``names``, as loaded."""
        self.texts: dict[str, str] = {}
        """The source text of each of those that is a function (``Function.prototype.toString``)."""

    def watch(self) -> None:
        """Run this script's calls from now on one of the :data:`WATCH_THREADS` (its context, bound
        to the thread that made it, is made again there on the next call). Call it between calls."""
        self._thread = THREADS + next(_watch_assigned) % WATCH_THREADS
        self._context, self._call = None, None

    def load(self, names: tuple[str, ...], until: float | None = None) -> None:
        """Load the source now (JsLoadError when it does not parse or its top level fails) and
        note what ``names`` are in it. Waits until ``until`` (a :func:`time.monotonic` instant:
        the admission's deadline; by default :data:`WAIT` seconds)."""
        on_js_thread(self._thread, self._load_named, names, until=until)

    def _load_named(self, names: tuple[str, ...]) -> None:
        context = self._load()
        for name in names:  # identifiers of ours: also finds top-level let, const and class bindings
            self.types[name] = str(context.eval(f"typeof {name}"))
            if self.types[name] == "function":
                text = context.eval(f"String({name})")
                self.texts[name] = text if isinstance(text, str) else ""

    def _load(self) -> quickjs.Context:
        context = quickjs.Context()
        context.set_memory_limit(self.memory)
        limit = min(self.timeout, LOAD_LIMIT)
        context.set_time_limit(limit)
        call = context.eval(_CALL)
        try:
            context.eval(self.source)
        except quickjs.JSException as e:
            reason = describe_error(e, where=False)
            if reason == "interrupted":
                reason = f"the script's top level ran longer than its {limit * 1000:g} ms limit"
            elif reason == "out of memory":
                reason = f"the script's top level used more than its {self.memory // _MIB} MiB memory limit"
            raise JsLoadError(reason, line_of(str(e))) from None
        except ValueError as e:  # a NUL character or a lone surrogate: quickjs cannot take the text
            raise JsLoadError(f"the script cannot be read: {e}") from None
        self._context, self._call = context, call
        return context

    def call(self, name: str, args: list[JSON], time_limit: float | None = None,
             state: Binding | None = None) -> JSON:
        """``name(*args)``'s result, converted to JSON (undefined and functions are null).

        ``time_limit`` (seconds) lowers the script's own limit, never raises it, and is also the
        most wall time the caller waits (by default :data:`WAIT`). ``state``, when given, says
        where the state goes. JsError when the script throws, is interrupted, runs out of memory,
        returns what JSON cannot hold, does not finish in time, or binds a state that is not ready
        or failed.
        """
        # Under a wall-time bound the CPU limit is a little shorter, so that it normally ends the script.
        limit = self.timeout if time_limit is None else max(min(time_limit * 0.9, self.timeout), 0.001)
        until = time.monotonic() + time_limit if time_limit is not None and math.isfinite(time_limit) else None
        text = self._arguments(args)
        return on_js_thread(self._thread, self._invoke, name, text, limit, state, until=until)

    def submit(self, name: str, args: list[JSON], state: Binding | None = None) -> concurrent.futures.Future[JSON]:
        """Queue ``name(*args)`` on the script's thread, under its own limits, without waiting:
        calls run in the order they are queued (how watch hooks see events in order)."""
        return self.queue(self._invoke, name, self._arguments(args), self.timeout, state)

    def queue(self, fn: Callable[..., _T], *args: Any) -> concurrent.futures.Future[_T]:
        """Queue ``fn(*args)`` on the script's thread, after every call queued before it."""
        return _executor(self._thread).submit(fn, *args)

    @staticmethod
    def _arguments(args: list[JSON]) -> str:
        try:
            return json.dumps(args, allow_nan=False)  # ASCII: a lone surrogate travels as an escape
        except ValueError as e:  # NaN or infinity: no JSON form
            raise JsError(f"the input cannot be given to the script: {e}") from None

    def _invoke(self, name: str, text: str, limit: float, binding: Binding | None) -> JSON:
        """On the script's thread: the call, its log lines written, the state kept when it may change."""
        box = binding.state if binding is not None else None
        if box is not None and box.problem is not None:
            raise JsError(box.problem)
        if binding is not None and box is not None and not box.ready and not binding.early:
            raise JsError("its state is not built yet: the objects its watch hooks follow are still being listed")
        keep = binding is not None and binding.writable
        result = self._run(name, text, limit, box.text if box is not None else "",
                           binding.at if binding is not None else -1, keep)
        head, _, kept = result.partition("\x01")
        try:
            value, lines = json.loads(head)
        except (ValueError, RecursionError):
            raise JsError("the result cannot be read as JSON (nested too deeply)") from None
        self._log(lines)
        if box is not None and keep:
            if len(kept) > box.limit:
                box.problem = (f"{name} left a state of {len(kept)} characters of JSON, more than its limit of "
                               f"{box.limit}: the rule fails until its policy changes")
                raise JsError(box.problem)
            box.text = kept
        return value

    def _log(self, lines: JSON) -> None:
        """Write what the call logged: at most :data:`LOG_LINES` lines, then one notice."""
        for i, entry in enumerate(lines if isinstance(lines, list) else []):
            level, text = entry if isinstance(entry, list) and len(entry) == 2 else ("info", str(entry))
            if i == LOG_LINES:
                text = f"more than {LOG_LINES} lines logged in one call: the rest are dropped"
            log.log(logging.DEBUG if level == "debug" else logging.INFO, str(text), extra={"script": self.name})

    def _run(self, name: str, text: str, limit: float, state: str = "", at: int = -1, keep: bool = False) -> str:
        context, call = self._context, self._call
        try:
            if context is None or call is None:
                context = self._load()
                call = self._call
            context.set_time_limit(limit)
            fn = context.eval(name)  # an identifier of ours, so top-level let and const are found
            if not isinstance(fn, quickjs.Object):
                raise JsError(f"{name} is not a function")
            result = call(fn, text, state, at, keep)  # type: ignore[misc]
        except JsLoadError:
            raise
        except (quickjs.JSException, quickjs.StackOverflow) as e:
            reason = describe_error(e)
            if reason in ("interrupted", "out of memory"):
                self._context = None  # the script stopped halfway: start the next call afresh
            if reason == "interrupted":
                reason = f"the script ran longer than its {limit * 1000:g} ms limit"
            elif reason == "out of memory":
                reason = f"the script used more than its {self.memory // _MIB} MiB memory limit"
            raise JsError(reason) from None
        finally:
            if self._context is not None:
                self._context.set_time_limit(self.timeout)
        if not isinstance(result, str):
            raise JsError("the result cannot be converted to JSON")
        return result
