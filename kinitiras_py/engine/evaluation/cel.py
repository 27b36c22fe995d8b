"""CEL adapter: compile rule expressions once, evaluate them against JSON inputs.

This is the only module that imports ``cel_expr_python``; everything else sees :class:`Program`,
plain JSON values and :mod:`kinitiras_py.base.errors`.

Environment
    Variables :data:`VARIABLES`, all ``dyn``; a variable not supplied at evaluation is ``null``,
    so a rule can test ``oldObject == null``. Extensions: strings, optional (``obj.?field``,
    ``m[?'k']``, ``optional.of/none``, ``orValue``), math, encoders (base64), bindings
    (``cel.bind``), plus the function library of :mod:`.celext`.

Inputs
    JSON values (dict/list/str/int/float/bool/None). An integer outside the int64 range becomes a
    float, as the API server's own JSON decoding does; an integer too large for a float, or a
    value of any other type (a tuple included), raises :class:`CelEvalError`.

Results
    Plain JSON. A result holding bytes, a timestamp, a duration, a type or a map with non-string
    keys raises :class:`CelEvalError` (convert with ``string()``).

cel-expr-python 0.1.3, and what this module does about it
    * Python functions: the bridge leaks every call's arguments and result; calls go through a
      ctypes trampoline that releases them after the evaluation (see :func:`_bridge`). An error
      raised by a library function returning a list, map or dyn aborts the evaluation instead of
      being absorbed by ``||``/``&&`` as CEL errors normally are.
    * ``None``: converting a null drops a reference to ``None`` (fatal before Python 3.12);
      results containing nulls are converted element by element, argument nulls are given back.
    * Optionals: converting one inside a list, a map or an argument crashes the process, so an
      optional may not be a list element, a map key or value, the argument of ``dyn()`` or of a
      library function (``[?x]`` and ``{?k: x}`` are fine), nor the result: unwrap it with
      ``orValue()``. This is checked at compile time (:func:`_optional_misuse`).
    * The branches of ``c ? a : b`` must have one static type: ``c ? {'a': 1} : {'b': 'x'}``
      does not compile, ``c ? dyn({'a': 1}) : dyn({'b': 'x'})`` does.
    * Selecting a field of ``null`` is an error, even under ``has()`` or ``.?``: on CREATE
      ``oldObject.metadata``, ``has(oldObject.metadata)`` and ``oldObject.?metadata`` all fail,
      so test ``oldObject != null`` first.
    * There is no cost limit; expressions are bounded only by :data:`MAX_SOURCE_BYTES`.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

from kinitiras_py.base.errors import CelCompileError, CelEvalError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import celext

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject")
MAX_SOURCE_BYTES = 64 * 1024
CACHE_SIZE = 1024

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# absl status decorations around cel-cpp messages: "INVALID_ARGUMENT: ... [INVALID_ARGUMENT]".
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]$")
# cel-cpp runtime messages reworded as Kubernetes (cel-go) users know them.
_REWORDINGS = (
    (re.compile(r'^Key not found in map : "(.*)"$', re.DOTALL), r"no such key: \1"),
    (re.compile(r"^Applying SELECT to non-message type$"),
     "cannot select a field of a value that is not a map (null?); compare it with null first"),
)

# -- calling Python from cel-expr-python 0.1.3 ----------------------------------------------------
#
# Its bridge (PyCelFunctionAdapter::Invoke) never releases the argument tuple it builds nor the
# value a function returns, so every call would leak its converted arguments and result: a whole
# object for workload.containers(object). Our functions are therefore wrapped in a METH_VARARGS
# builtin made with ctypes, which receives that very tuple; each call's (arguments, result) pair
# is kept per thread and released by _release() once the evaluation is over. _env() probes
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
_leaks = {"args": False, "result": False}
# A failure travels back as an object cel-expr-python refuses; its type name carries the message.
_MARK = "\x1e"
_FAILURE = re.compile(f"{_MARK}(.*){_MARK}", re.DOTALL)


def _pending() -> list[tuple[Any, Any]]:
    if not hasattr(_calls, "pending"):
        _calls.pending = []
    pending: list[tuple[Any, Any]] = _calls.pending
    return pending


def _bridge(name: str, impl: Callable[..., Any]) -> Any:
    """``impl`` as a builtin function receiving the bridge's own argument tuple."""

    def trampoline(_self: int | None, args: tuple[Any, ...]) -> Any:
        try:
            result = impl(*args)
        except Exception as e:  # a ctypes callback cannot raise: see _MARK
            message = (str(e) or type(e).__name__).replace("\0", "")
            result = type(f"{_MARK}{message}{_MARK}", (), {"__slots__": ()})()
        _pending().append((args, result))
        return result

    callback = _CALLBACK(trampoline)
    method = _MethodDef(name.encode(), ctypes.cast(callback, ctypes.c_void_p), _METH_VARARGS, None)
    _keepalive.append((callback, method))
    return _new_builtin(ctypes.byref(method), None, None)


def _release() -> None:
    """Release what this thread's calls left behind (call once no evaluation is running)."""
    pending = _pending()
    while pending:
        args, result = pending.pop()
        if _leaks["args"]:
            # Freeing the tuple drops one reference per null in it that the bridge never took
            # (before Python 3.12 None is mortal): give them back first.
            for _ in range(_count_nones(args)):
                _incref(None)
            _decref(args)
        if _leaks["result"]:
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


def _probe_leaks() -> None:
    env = cel.NewEnv(functions=[cel.FunctionDecl("probe", [cel.Overload(
        "probe_string", cel.Type.List(cel.Type.DYN), [cel.Type.STRING], impl=_bridge("probe", lambda s: [s]))])])
    _release()
    env.compile("probe('x')").eval()
    args, result = _pending().pop()
    # Referenced here and by getrefcount's own argument: one more is the bridge's leak.
    _leaks["args"], _leaks["result"] = sys.getrefcount(args) > 2, sys.getrefcount(result) > 2
    _pending().append((args, result))
    del args, result
    _release()


# -- optionals must not reach cel-expr-python's conversion to Python ------------------------------
#
# Converting an optional inside a list, a map or a function argument crashes the process (a
# NULL lands in the Python container). Optionals enter containers only through literals (macros
# expand to literals too), dyn() hides them, and only our functions take arguments; so a program
# is refused when an optional-typed value is a list element, a map key or value, the argument of
# dyn() or an argument of a library function. The checked AST comes from Expression.serialize(),
# an Any-wrapped cel.expr.CheckedExpr decoded here with a minimal protobuf reader.

_OPTIONAL = b"\n\roptional_type"  # abstract_type.name of an optional, anywhere in a Type message


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    """(field number, int or bytes) pairs of one protobuf message."""
    out: list[tuple[int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        else:  # fixed64 / fixed32 scalars, unused by the fields read here
            size = 8 if wire == 1 else 4
            value, i = buf[i:i + size], i + size
        out.append((key >> 3, value))
    return out


# Sub-expression fields per Expr kind: select 5 {operand 1}, call 6 {target 1, args 3}, list 7
# {elements 1}, map 8 {entries 2 -> {map_key 3, value 4}}, comprehension 9 {range 2, init 4,
# condition 5, step 6, result 7}. Ids are field 2 of an Expr, types field 3 of a CheckedExpr.
_CHILDREN = {5: (1,), 6: (1, 3), 7: (1,), 8: (3, 4), 9: (2, 4, 5, 6, 7)}


def _optional_misuse(serialized: bytes, library: frozenset[str]) -> str | None:
    """What in a program would hand an optional to cel-expr-python's conversion, or None."""
    checked = _fields(dict(_fields(serialized))[2])  # Any.value is the CheckedExpr
    types = {entry[1]: entry.get(2, b"") for entry in (dict(_fields(v)) for n, v in checked if n == 3)}

    def optional(expr: bytes) -> bool:
        return _OPTIONAL in types.get(dict(_fields(expr)).get(2, 0), b"")

    pending = [v for n, v in checked if n == 4]
    while pending:
        for kind, body in _fields(pending.pop()):
            parts = _fields(body) if kind in _CHILDREN else []
            exposed: list[bytes] = []  # sub-expressions whose values would be converted or hidden
            name = ""
            if kind == 6:
                name = next((v.decode() for n, v in parts if n == 2), "")
                if name == "dyn" or name in library:
                    exposed = [v for n, v in parts if n in (1, 3)]
            elif kind == 7:  # elements marked `[?x]` are unwrapped by the list itself
                skip = {i for n, v in parts if n == 2 for i in _packed(v)}
                exposed = [v for i, v in enumerate(v for n, v in parts if n == 1) if i not in skip]
            elif kind == 8:  # likewise the value of a `{?k: v}` entry (field 5)
                entries = [dict(_fields(v)) for n, v in parts if n == 2]
                parts = [(n, v) for entry in entries for n, v in entry.items()]
                exposed = [e[3] for e in entries if 3 in e] + [e[4] for e in entries if 4 in e and not e.get(5)]
            if any(map(optional, exposed)):
                return {6: f"an argument of {name}()", 7: "a list element", 8: "a map key or value"}[kind]
            pending.extend(v for n, v in parts if n in _CHILDREN.get(kind, ()))
    return None


def _packed(value: int | bytes) -> list[int]:
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        number, i = _varint(value, i)
        out.append(number)
    return out


_LIBRARY = frozenset(f.name for f in celext.FUNCTIONS)
_TYPES: dict[celext.Kind, cel.Type] = {
    "dyn": cel.Type.DYN,
    "bool": cel.Type.BOOL,
    "int": cel.Type.INT,
    "double": cel.Type.DOUBLE,
    "string": cel.Type.STRING,
    "list": cel.Type.List(cel.Type.DYN),
}
# An "any" parameter becomes one overload per JSON kind. A dyn parameter would type-check but
# never match at runtime; google.protobuf.Any would match everything, optionals included, and
# cel-expr-python crashes converting an optional argument. With concrete kinds an optional
# argument is a compile error, or a "no matching overload" error when hidden behind dyn().
_ANY = (cel.Type.NULL, cel.Type.BOOL, cel.Type.INT, cel.Type.UINT, cel.Type.DOUBLE, cel.Type.STRING,
        cel.Type.BYTES, cel.Type.List(cel.Type.DYN), cel.Type.Map(cel.Type.DYN, cel.Type.DYN))


def _declaration(function: celext.Function) -> cel.FunctionDecl:
    overloads = []
    for o in function.overloads:
        impl = _bridge(function.name, o.impl)
        signatures = list(itertools.product(*(_ANY if p == "any" else (_TYPES[p],) for p in o.params)))
        for n, params in enumerate(signatures):
            overload_id = o.id if len(signatures) == 1 else f"{o.id}_{n}"
            overloads.append(cel.Overload(overload_id, _TYPES[o.result], list(params), is_member=o.member,
                                          impl=impl))
    return cel.FunctionDecl(function.name, overloads)


@functools.cache
def _env() -> cel.Env:
    _probe_leaks()
    env = cel.NewEnv(
        variables={name: cel.Type.DYN for name in VARIABLES},
        extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_math.ExtMath(),
                    ext_encoders.ExtEncoders(), ext_bindings.ExtBindings()],
        functions=[_declaration(f) for f in celext.FUNCTIONS],
    )
    # The environment is configured lazily by the first compile; do it here so a clash in our
    # own declarations fails loudly instead of being reported as a broken policy.
    env.compile("true")
    return env


def _clean(message: str) -> str:
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip()))


def _eval_error(message: str) -> CelEvalError:
    failure = _FAILURE.search(message)
    if failure:  # raised by one of our functions
        return CelEvalError(failure.group(1))
    text = _clean(message)
    for pattern, replacement in _REWORDINGS:
        text = pattern.sub(replacement, text)
    return CelEvalError(text)


@dataclass(frozen=True, eq=False, slots=True)
class Program:
    """A compiled CEL expression: immutable, reusable across requests, threads and tasks."""

    source: str
    _expression: Any = field(repr=False)

    @property
    def result_type(self) -> str:
        """The checker's static result type: ``BOOL``, ``LIST<DYN>``, ``DYN``..."""
        return str(self._expression.return_type().name())

    def evaluate(self, variables: Mapping[str, JSON]) -> JSON:
        """Evaluate with ``variables`` (names from :data:`VARIABLES`; missing ones are null).

        Returns a plain JSON value; raises :class:`CelEvalError` when evaluation fails.
        """
        unknown = set(variables) - set(VARIABLES)
        if unknown:
            raise ValueError(f"unknown CEL variables {sorted(unknown)}; expected some of {VARIABLES}")
        data = {name: _input(name, variables.get(name)) for name in VARIABLES}
        try:
            return _result(self._expression.eval(data=data))
        except RuntimeError as e:  # some conversion failures raise instead of yielding an error value
            raise _eval_error(str(e)) from None
        finally:
            _release()


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_program(source: str) -> Program:
    """Compile ``source``; the same text always yields the same :class:`Program`.

    Raises :class:`CelCompileError` whose message is the compiler's diagnostic, with the caret
    under the offending position. Results are cached by source text (LRU, :data:`CACHE_SIZE`).
    """
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise CelCompileError(f"the expression is {size} bytes long; the limit is {MAX_SOURCE_BYTES}")
    try:
        expression = _env().compile(source)
    except RuntimeError as e:
        raise CelCompileError(_clean(str(e))) from None
    misuse = _optional_misuse(expression.serialize(), _LIBRARY)
    if misuse:
        raise CelCompileError(f"{misuse} is an optional value, which cel-expr-python cannot convert; "
                              "unwrap it with .orValue(default) first")
    if "optional_type" in expression.return_type().name():
        raise CelCompileError(
            f"the expression evaluates to {expression.return_type().name()}, which has no JSON form; "
            "unwrap it with .orValue(default)"
        )
    return Program(source, expression)


def check_syntax(source: str) -> str | None:
    """None when ``source`` compiles (parses and type-checks), else the compiler's diagnostic."""
    try:
        compile_program(source)
    except CelCompileError as e:
        return str(e)
    return None


class _NotJSON(Exception):
    """A value that cannot cross the boundary; ``where`` is filled in while unwinding."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.where: list[str] = []

    def error(self, root: str) -> CelEvalError:
        return CelEvalError(f"{root}{''.join(reversed(self.where))}: {self.reason}")


def _input(name: str, value: JSON) -> Any:
    try:
        return _to_cel(value)
    except _NotJSON as e:
        raise e.error(name) from None


def _to_cel(value: JSON) -> Any:
    """``value`` as cel-expr-python accepts it; the same object when no change is needed."""
    if type(value) is dict or type(value) is list:
        # Fast path: plain decoded JSON whose integers all fit 53 bits needs no change.
        try:
            orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER | orjson.OPT_PASSTHROUGH_SUBCLASS)
            return value
        except TypeError:
            pass
    return _to_cel_walk(value)


def _to_cel_walk(value: JSON) -> Any:
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is float:
        return value
    if kind is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        try:
            return float(value)  # what the API server's JSON decoder does with such numbers
        except OverflowError:
            raise _NotJSON(f"integer {value} is too large for CEL") from None
    if isinstance(value, dict):
        out = None if kind is dict else dict(value)  # cel-expr-python refuses subclasses
        for key, item in value.items():
            try:
                converted = _to_cel_walk(item)
            except _NotJSON as e:
                e.where.append(f".{key}")
                raise
            if converted is not item:
                out = out if out is not None else dict(value)
                out[key] = converted
        return value if out is None else out
    if isinstance(value, list | tuple):
        out_list = None if kind is list else list(value)
        for i, item in enumerate(value):
            try:
                converted = _to_cel_walk(item)
            except _NotJSON as e:
                e.where.append(f"[{i}]")
                raise
            if converted is not item:
                out_list = out_list if out_list is not None else list(value)
                out_list[i] = converted
        return value if out_list is None else out_list
    raise _NotJSON(f"a {kind.__name__} is not a JSON value")


def _result(result: Any) -> JSON:
    """The JSON form of an evaluation result (a ``cel.Value``)."""
    if result.type() == cel.Type.ERROR:
        try:
            message = result.value()
        except TypeError:  # an optional also reports type ERROR, and cannot be converted
            message = None
        if isinstance(message, str):
            raise _eval_error(message)
        raise CelEvalError("the result is an optional value; unwrap it with .orValue(default)")
    try:
        # plain_value() drops a reference to None for every null it converts (fatal once None's
        # count reaches zero, before Python 3.12 made None immortal) and crashes the process on
        # an optional inside a map (which _optional_misuse should already have refused).
        # Results whose debug text shows either take the slow path.
        text = repr(result)
        plain = _careful(result) if "null" in text or "optional." in text else result.plain_value()
        _check_json(plain)
    except _NotJSON as e:
        raise e.error("result") from None
    return plain


def _careful(value: Any) -> Any:
    """Convert a ``cel.Value`` element by element, never asking cel-expr-python for a null."""
    kind = value.type()
    if kind == cel.Type.NULL:
        return None
    if kind == cel.Type.ERROR:  # inside a container this can only be an optional
        raise _NotJSON("an optional value has no JSON form; unwrap it with .orValue(default)")
    item = value.value()
    if isinstance(item, list):
        out = []
        for i, element in enumerate(item):
            try:
                out.append(_careful(element))
            except _NotJSON as e:
                e.where.append(f"[{i}]")
                raise
        return out
    if isinstance(item, dict):
        result = {}
        for key, element in item.items():
            try:
                result[key] = _careful(element)
            except _NotJSON as e:
                e.where.append(f".{key}")
                raise
        return result
    return item


def _check_json(value: Any) -> None:
    """Raise :class:`_NotJSON` unless a CEL result (from ``plain_value()``) is plain JSON."""
    if value is None or isinstance(value, str | bool | int | float):
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            try:
                _check_json(item)
            except _NotJSON as e:
                e.where.append(f"[{i}]")
                raise
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJSON(f"map key {key!r} is not a string, which JSON requires")
            try:
                _check_json(item)
            except _NotJSON as e:
                e.where.append(f".{key}")
                raise
        return
    raise _NotJSON(f"a {type(value).__name__} value has no JSON form; convert it with string()")
