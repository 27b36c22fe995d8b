"""Calling Python functions from cel-expr-python 0.1.3 without leaking (a workaround module).

Only :mod:`.cel` uses this; nothing here knows about policies.
"""

from __future__ import annotations

import ctypes
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

import orjson
from cel_expr_python import cel

from kinitiras_py.engine.evaluation import celvalues

# -- calling Python from cel-expr-python 0.1.3 ----------------------------------------------------
#
# Its bridge (PyCelFunctionAdapter::Invoke) never releases the argument tuple it builds nor the
# value a function returns, so every call would leak its converted arguments and result: a whole
# object for workload.containers(object). Our functions are therefore wrapped in a METH_VARARGS
# builtin made with ctypes, which receives that very tuple; each call's (arguments, result) pair
# is kept per thread and released by release() once the evaluation is over. celenv.env() probes
# whether the installed build leaks, so a fixed release switches the compensation off by itself.


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_METH_VARARGS = 1
_CALLBACK = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object)
_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.argtypes = [ctypes.POINTER(_MethodDef), ctypes.c_void_p, ctypes.c_void_p]
_new_builtin.restype = ctypes.py_object
_incref, _decref = ctypes.pythonapi.Py_IncRef, ctypes.pythonapi.Py_DecRef
for _f in (_incref, _decref):
    _f.argtypes, _f.restype = [ctypes.py_object], None
_calls = threading.local()
_keepalive: list[object] = []  # callbacks and method definitions live as long as their builtins
leaks = {"args": False, "result": False}
# A failure travels back as an object cel-expr-python refuses; its type name carries the message.
MARK = "\x1e"
FAILURE = re.compile(f"{MARK}(.*){MARK}", re.DOTALL)


def calls_pending() -> list[tuple[Any, Any]]:
    if not hasattr(_calls, "pending"):
        _calls.pending = []
    pending: list[tuple[Any, Any]] = _calls.pending
    return pending


def bridge(name: str, impl: Callable[..., Any], scalars: bool = False,
           before: Callable[[], None] | None = None) -> Any:
    """``impl`` as a builtin function receiving the bridge's own argument tuple. ``scalars``:
    its parameters are never lists or maps, so they are handed over as they come (there is no
    map to put in order); ``before``, when given, runs first at every call and may refuse it by
    raising (it costs less there than in a wrapper of ``impl``: each call of these is a few µs
    of a rule's evaluation)."""
    ordered = celvalues.ordered

    def trampoline(_self: int | None, args: tuple[Any, ...]) -> Any:
        try:
            if before is not None:
                before()
            # Maps in key order, not in the order of cel-cpp's hash tables (see celorder).
            result = impl(*args) if scalars else impl(*map(ordered, args))
        except Exception as e:  # a ctypes callback cannot raise: see MARK
            message = (str(e) or type(e).__name__).replace("\0", "")
            result = type(f"{MARK}{message}{MARK}", (), {"__slots__": ()})()
        try:
            pending = _calls.pending
        except AttributeError:
            pending = calls_pending()
        pending.append((args, result))
        return result

    callback = _CALLBACK(trampoline)
    method = _MethodDef(name.encode(), ctypes.cast(callback, ctypes.c_void_p), _METH_VARARGS, None)
    _keepalive.append((callback, method))
    return _new_builtin(ctypes.byref(method), None, None)


def release() -> None:
    """Release what this thread's calls left behind (call once no evaluation is running)."""
    pending = calls_pending()
    if not pending:
        return
    if leaks["args"]:
        # Freeing the tuples drops one reference per null in them that the bridge never took
        # (before Python 3.12 None is mortal): give them back first, counted in one pass.
        for _ in range(_count_nones([args for args, _ in pending])):
            _incref(None)
    while pending:
        args, result = pending.pop()
        if leaks["args"]:
            _decref(args)
        if leaks["result"]:
            _decref(result)


def _count_nones(value: Any) -> int:
    # At C speed: every null serialises as `null`. A "null" inside a string over-counts, which is
    # safe (None only keeps a higher reference count); under-counting would crash the process.
    try:
        return orjson.dumps(value).count(b"null")
    except TypeError:
        return _count_nones_exactly(value)


def _count_nones_exactly(value: Any) -> int:
    if value is None:
        return 1
    if isinstance(value, list | tuple):
        return sum(_count_nones_exactly(item) for item in value)
    if isinstance(value, dict):
        return sum(_count_nones_exactly(item) for item in value.values())
    return 0


def probe_leaks() -> None:
    env = cel.NewEnv(functions=[cel.FunctionDecl("probe", [cel.Overload(
        "probe_string", cel.Type.List(cel.Type.DYN), [cel.Type.STRING], impl=bridge("probe", lambda s: [s]))])])
    release()
    env.compile("probe('x')").eval()
    args, result = calls_pending().pop()
    # Referenced here and by getrefcount's own argument: one more is the bridge's leak.
    leaks["args"], leaks["result"] = sys.getrefcount(args) > 2, sys.getrefcount(result) > 2
    calls_pending().append((args, result))
    del args, result
    release()
