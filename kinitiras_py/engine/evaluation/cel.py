"""CEL adapter: compile rule expressions once, evaluate them against JSON inputs.

This is the only module that imports ``cel_expr_python``; everything else sees :class:`Program`,
plain JSON values and :mod:`kinitiras_py.base.errors`.

Environment
    Variables :data:`.celenv.VARIABLES`, all ``dyn``; a variable not supplied at evaluation is ``null``,
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
      ctypes trampoline that releases them after the evaluation (see :func:`celbridge.bridge`). An error
      raised by a library function returning a list, map or dyn aborts the evaluation instead of
      being absorbed by ``||``/``&&`` as CEL errors normally are.
    * ``None``: converting a null drops a reference to ``None`` (fatal before Python 3.12);
      results containing nulls are converted element by element, argument nulls are given back.
    * Optionals: converting one inside a list, a map or an argument crashes the process, so an
      optional may not be a list element, a map key or value, the argument of ``dyn()`` or of a
      library function (``[?x]`` and ``{?k: x}`` are fine), nor the result: unwrap it with
      ``orValue()``. This is checked at compile time (:func:`celcheck.inspect`).
    * The branches of ``c ? a : b`` must have one static type: ``c ? {'a': 1} : {'b': 'x'}``
      does not compile, ``c ? dyn({'a': 1}) : dyn({'b': 'x'})`` does.
    * Maps have no order of their own (a hash table's, changing between evaluations): loops
      over a map run over its keys sorted, and maps in results and in our functions' arguments
      are put in that order (:mod:`.celorder`), so that the same input gives the same result.
    * Selecting a field of ``null`` is an error, even under ``has()`` or ``.?``: on CREATE
      ``oldObject.metadata``, ``has(oldObject.metadata)`` and ``oldObject.?metadata`` all fail,
      so test ``oldObject != null`` first.
    * Evaluation holds the GIL (measured: a counting thread stalls for the whole evaluation)
      except while our Python functions run, so a worker thread frees the event loop only
      between those calls (:func:`runs_long` says when one is worth its ~100 µs). What bounds
      an evaluation instead:
      :func:`compile_program` refuses a program whose estimated cost (:mod:`.cost`) exceeds
      :data:`cost.BUDGET` even for small requests, and a program admitted for smaller requests
      only refuses larger ones (:attr:`Program.bound`); cel-cpp stops after
      :data:`cost.MAX_ITERATIONS` loop iterations; our
      functions refuse lists longer than :data:`costmodel.FUNCTION_ITEMS` and give up once an
      evaluation has run :data:`bounds.TIME_LIMIT` seconds (:mod:`.bounds`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from cel_expr_python import cel

from kinitiras_py.base.errors import CelCompileError, CelEvalError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import (
    bounds,
    celbridge,
    celcheck,
    celenv,
    celext,
    celmemo,
    celorder,
    celreads,
    celvalues,
    cost,
    regex,
)
from kinitiras_py.engine.evaluation.celbindings import Bindings

_READS: dict[celreads.Reads, celreads.Reads] = {}
"""Programs' reads, interned: programs reading alike share activations (Bindings keys them by id)."""
MAX_INTERNED = 4096
MAX_SOURCE_BYTES = 64 * 1024
CACHE_SIZE = 1024
INLINE_COST = 1_000_000
"""Programs estimated above this (Kubernetes' PerCallLimit, ~0.1 s) may run in a worker thread."""
INLINE_BYTES = 64 * 1024
"""Objects above this make programs that could cost more than INLINE_COST run in a worker thread."""

# absl status decorations around cel-cpp messages: "INVALID_ARGUMENT: ... [INVALID_ARGUMENT]".
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]$")
# cel-cpp runtime messages reworded as Kubernetes (cel-go) users know them.
_REWORDINGS = (
    (re.compile(r'^Key not found in map : "(.*)"$', re.DOTALL), r"no such key: \1"),
    (re.compile(r"^Applying SELECT to non-message type$"),
     "cannot select a field of a value that is not a map (null?); compare it with null first"),
)

_LIBRARY = frozenset(f.name for f in celext.FUNCTIONS)
def _clean(message: str) -> str:
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip()))


def _eval_error(message: str) -> CelEvalError:
    failure = celbridge.FAILURE.search(message)
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
    bound: cost.Estimate
    """The estimated cost, and the request data it holds for (checked before evaluating)."""
    reads: celreads.Reads | None = None
    """The parts of each variable the program reads (:func:`celreads.reads`); None: anything."""

    @property
    def result_type(self) -> str:
        """The checker's static result type: ``BOOL``, ``LIST<DYN>``, ``DYN``..."""
        return str(self._expression.return_type().name())

    def checked(self) -> bytes:
        """The checked program: an Any-wrapped ``cel.expr.CheckedExpr`` (read by :mod:`.celcheck`)."""
        return bytes(self._expression.serialize())

    def evaluate(self, variables: Mapping[str, JSON] | Bindings, remember: bool = True) -> JSON:
        """Evaluate with ``variables`` (names from :data:`.celenv.VARIABLES`; missing ones are null).

        Returns a plain JSON value; raises :class:`CelEvalError` when evaluation fails.
        ``remember=False`` leaves the result cache (:mod:`.celmemo`) out: an evaluation made
        while a policy is checked is neither looked up nor kept, nor counted.
        """
        bound = self.bound
        paths, names = bound.paths, bound.variables
        # Which of the two kinds ``variables`` is, asked once: an ABC check is slow.
        mapping: Mapping[str, JSON] | None = None
        bindings: Bindings | None = None
        if isinstance(variables, Mapping):
            mapping = variables
        else:
            bindings = variables
        if paths is not None and names is not None:
            if mapping is not None:
                bounds.check_size(bound, bounds.longest(mapping, paths), bounds.largest(mapping, names))
            elif bindings is not None:
                bounds.check_size(bound, bindings.longest(paths), bindings.largest(names, bound.bytes))
        if mapping is not None:
            data = celenv.projected(mapping, self.reads)[0]
            memo = celmemo.key(data) if remember else None
        else:
            memo = bindings.key(self.reads) if remember and bindings is not None else None
        if memo is not None:
            found = celmemo.get(self.source, memo)
            if found is not celmemo.MISSING:
                return found
        bounds.start()
        try:
            if bindings is not None:
                result = _result(self._expression.eval(activation=bindings.activation(self.reads)))
            else:
                result = _result(self._expression.eval(data=celenv.prepare(data)))
        except RuntimeError as e:  # some conversion failures raise instead of yielding an error value
            raise _eval_error(str(e)) from None
        finally:
            bounds.stop()
            celbridge.release()
        if memo is not None:
            celmemo.put(self.source, memo, result)
        return result


def runs_long(programs: Iterable[Program | None], obj: JSON, size: int | None = None) -> bool:
    """Whether evaluating ``programs`` against ``obj`` may take long enough to leave the event loop.

    True when a program costs more than :data:`INLINE_COST` by itself, or may for a request
    larger than :data:`INLINE_BYTES` and ``obj`` is (``size``, when given, is taken for its
    serialized size: the review's, which holds it). A thread hop costs about 100 µs, so the
    common small request is evaluated where it is.
    """
    dear = [p for p in programs if p is not None and p.bound.cost > INLINE_COST]
    if any(p.bound.base > INLINE_COST for p in dear):
        return True
    if not dear:
        return False
    if size is not None:
        return size > INLINE_BYTES
    try:
        return len(orjson.dumps(obj, option=orjson.OPT_PASSTHROUGH_SUBCLASS)) > INLINE_BYTES
    except TypeError:  # not plain JSON (an integer beyond 64 bits): the conversion reports it
        return False


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
        expression = celenv.env().compile(source)
    except RuntimeError as e:
        raise CelCompileError(_clean(str(e))) from None
    serialized = expression.serialize()
    found = celcheck.inspect(serialized, _LIBRARY)
    if found.optional_misuse:
        raise CelCompileError(f"{found.optional_misuse} is an optional value, which cel-expr-python cannot "
                              "convert; unwrap it with .orValue(default) first")
    for function, pattern in found.regex_literals:
        try:
            regex.compiled(pattern)
        except ValueError as e:
            raise CelCompileError(f"{function}: the pattern {pattern!r} is not a regular expression RE2 (and "
                                  f"Kubernetes) accepts: {e}") from None
    if "optional_type" in expression.return_type().name():
        raise CelCompileError(
            f"the expression evaluates to {expression.return_type().name()}, which has no JSON form; "
            "unwrap it with .orValue(default)"
        )
    bound = cost.estimate(serialized, INLINE_COST)
    if bound.cost > cost.BUDGET:
        raise CelCompileError(
            f"estimated cost {bound.cost:,} exceeds the budget of {cost.BUDGET:,} (about a second), even for "
            f"requests of {bound.bytes:,} bytes with lists of {bound.items} entries: iterate less, or over "
            "shorter lists")
    reads = celreads.reads(serialized, celenv.VARIABLES)
    rewritten = celorder.ordered(serialized)  # what was estimated and read above, with maps iterated in order
    if rewritten is not None:
        expression = celenv.env().deserialize(rewritten)
    if reads is not None and len(_READS) < MAX_INTERNED:
        reads = _READS.setdefault(reads, reads)
    return Program(source, expression, bound, reads)


def check_syntax(source: str) -> str | None:
    """None when ``source`` compiles (parses and type-checks), else the compiler's diagnostic."""
    try:
        compile_program(source)
    except CelCompileError as e:
        return str(e)
    return None


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
        # an optional inside a map (which celcheck.inspect should already have refused).
        # Results whose debug text shows either take the slow path.
        text = repr(result)
        plain = celvalues.careful(result) if "null" in text or "optional." in text else result.plain_value()
        return celvalues.ordered_json(plain)  # cel-cpp's maps come out in an order of their own
    except celvalues.NotJSON as e:
        raise e.error("result") from None
