"""CEL functions for KubeMod-style rules: printing, templated values read as YAML, regex replace.

All take and return small values: a scalar, the text of one rendered value, one string.

* ``kubemod.printed(x)``: a scalar as Go's ``fmt.Sprint`` prints it after JSON decoding (every
  number is a float64 there: ``8080`` -> ``"8080"``, ``1000000`` -> ``"1e+06"``, ``1.5`` ->
  ``"1.5"``; ``null`` -> ``"<nil>"``; booleans ``"true"``/``"false"``). Match criteria compare
  non-string values in this form, as KubeMod does.
* ``kubemod.compare(op, a, b)``: KubeMod's comparison operators (gval's ``==``, ``!=``, ``<``,
  ``<=``, ``>``, ``>=``) on two values, for the cases CEL's own operators differ
  (:func:`gval_compare`).
* ``template.text(x)``: how a ``{{ }}`` placeholder of a value template writes ``x``: a string
  as it is, other scalars as CEL's ``string()`` writes them, ``null`` as nothing, lists and maps
  as JSON (which YAML reads back as the same value).
* ``template.goText(x)`` and ``template.goQuote(x)``: Go's text/template printing and Sprig's
  ``quote``, for templates converted from KubeMod.
* ``yaml.decode(text)``: the value a rendered template's text denotes, read as YAML 1.1 as
  KubeMod reads it (``'8080'`` is a number, ``'"8080"'`` a string, ``'true'`` a boolean).
* ``regexReplaceAll(regex, s, replacement)``: Sprig's function: every match of ``regex`` in
  ``s`` replaced, ``$1``/``${1}``/``${name}`` in ``replacement`` naming groups (Go's syntax).
  The pattern runs on Python's ``re``; patterns using RE2-only syntax are refused where the
  converter translates them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import orjson
import yaml

from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import regex

MAX_TEXT = 256 * 1024
"""Longest rendered value read as YAML."""


def go_printed(value: JSON) -> str:
    """``fmt.Sprint`` of a JSON-decoded scalar in Go."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_float(float(value))
    if isinstance(value, str):
        return value
    raise ValueError("kubemod.printed: only scalars are printed")


_GO_DECIMAL = re.compile(r"[+-]?(?:[0-9_]+\.?[0-9_]*|\.[0-9_]+)(?:[eE][+-]?[0-9][0-9_]*)?")
_GO_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F_]+\.?[0-9a-fA-F_]*|\.[0-9a-fA-F_]+)[pP][+-]?[0-9][0-9_]*")


def go_number(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)`` in Go, or None where it fails (out of range included)."""
    low = text.lower()
    if low == "nan":
        return math.nan
    unsigned = low[1:] if low[:1] in ("+", "-") else low
    if unsigned in ("inf", "infinity"):
        return -math.inf if low.startswith("-") else math.inf
    hexadecimal = _GO_HEX.fullmatch(text) is not None
    if not (hexadecimal or _GO_DECIMAL.fullmatch(text)) or not any(c.isdigit() for c in text):
        return None
    if "_" in text and not _underscores_ok(text):
        return None
    plain = text.replace("_", "")
    try:
        number = float.fromhex(plain) if hexadecimal else float(plain)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def gval_number(value: Any) -> float | None:
    """The number gval reads ``value`` as when it converts operands (a number, or a string
    ``strconv.ParseFloat`` reads), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    return go_number(value) if isinstance(value, str) else None


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}


def gval_compare(op: str, a: Any, b: Any) -> bool:
    """``a op b`` as KubeMod's select language computes it (false where it fails).

    ``==``/``!=``: as numbers when both read as one (:func:`gval_number`), else deep equality.
    Orderings: two numbers or two strings as they are, else as numbers when both read as one,
    else the two printed as Go prints them (``fmt.Sprint``), compared as text; null fails.
    """
    x, y = gval_number(a), gval_number(b)
    if op in ("==", "!="):
        equal = x == y if x is not None and y is not None else _deep_equal(a, b)
        return equal if op == "==" else not equal
    if op not in _ORDER:
        raise ValueError(f"kubemod.compare: unknown operator {op!r}")
    test = _ORDER[op]
    if isinstance(a, str) and isinstance(b, str):
        return bool(test(a.encode(), b.encode()))
    if x is not None and y is not None:
        return bool(test(x, y))
    if a is None or b is None:
        return False
    return bool(test(_go_value(a).encode(), _go_value(b).encode()))


def _deep_equal(a: Any, b: Any) -> bool:
    """Go's ``reflect.DeepEqual`` of two JSON-decoded values (every number a float64)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_equal(v, b[k]) for k, v in a.items())
    return type(a) is type(b) and a == b


def _underscores_ok(text: str) -> bool:
    """Go's rule for digit separators: each ``_`` between two digits, or after a base prefix."""
    body = text.lstrip("+-")
    if body[:2].lower() in ("0x", "0b", "0o"):
        body = "0" + body[2:]
    hexadecimal = text.lstrip("+-")[:2].lower() == "0x"
    digits = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
    previous = ""
    for i, ch in enumerate(body):
        if ch == "_" and (previous == "" or previous not in digits or i + 1 >= len(body) or body[i + 1] not in digits):
            return False
        previous = ch
    return True


def _go_float(number: float) -> str:
    """Go's ``%v`` of a float64: shortest digits; exponent form below 1e-4 and from 1e6 up."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "-0" if math.copysign(1, number) < 0 else "0"
    digits = repr(number)
    mantissa, _, exp_text = digits.partition("e")
    exponent = int(exp_text) if exp_text else 0
    sign = "-" if mantissa.startswith("-") else ""
    mantissa = mantissa.lstrip("-")
    whole, _, fraction = mantissa.partition(".")
    all_digits = (whole + fraction).lstrip("0")
    # The decimal exponent of the first significant digit.
    if whole.strip("0"):
        point = len(whole.lstrip("0")) + exponent
    else:
        point = -(len(fraction) - len(fraction.lstrip("0"))) + exponent
    significant = all_digits.rstrip("0") or "0"
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        head, tail = significant[0], significant[1:]
        body = head + ("." + tail if tail else "")
        return f"{sign}{body}e{'+' if exp10 >= 0 else '-'}{abs(exp10):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{significant}"
    if point >= len(significant):
        return sign + significant + "0" * (point - len(significant))
    return f"{sign}{significant[:point]}.{significant[point:]}"


def template_text(value: JSON) -> str:
    """How a value template's placeholder writes ``value``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if not value.is_integer() or abs(value) >= 1e16 else str(int(value))
    return orjson.dumps(value).decode()


def yaml_decode(text: str) -> Any:
    """The JSON value the YAML ``text`` denotes (one document; an empty text is null)."""
    if len(text) > MAX_TEXT:
        raise ValueError(f"yaml.decode: the text is {len(text)} characters; the limit is {MAX_TEXT}")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"the rendered value is not YAML: {str(e).splitlines()[0]}") from None
    return _jsonable(value)


def _jsonable(value: Any) -> JSON:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, bool) else str(k).lower(): _jsonable(v) for k, v in value.items()}
    # Timestamps, binary and the like: YAML types JSON lacks are kept as their text.
    return str(value)


_GO_GROUP = re.compile(r"\$(?:\{(\w+)\}|(\w+)|(\$))")


def regex_replace_all(pattern: str, text: str, replacement: str) -> str:
    """Sprig's ``regexReplaceAll``: Go's ``Regexp.ReplaceAllString`` (RE2, ``$1``/``${name}``
    expanded in ``replacement``)."""
    try:
        compiled = regex.compiled(pattern)
    except ValueError as e:
        raise ValueError(f"regexReplaceAll: invalid regular expression {pattern!r}: {e}") from None

    def expand(m: Any) -> str:
        def group(g: re.Match[str]) -> str:
            if g.group(3):
                return "$"
            name = g.group(1) or g.group(2)
            try:
                found = m.group(int(name)) if name.isdigit() else m.group(name)
            except (IndexError, KeyError):
                return ""
            return str(found or "")

        return _GO_GROUP.sub(group, replacement)

    out: list[str] = []
    start = 0
    for match in regex.go_matches(compiled, text):
        out += (text[start:match.start()], expand(match))
        start = match.end()
    return "".join(out) + text[start:]


def go_text(value: JSON) -> str:
    """How Go's text/template prints a JSON-decoded value: ``<no value>`` for null, numbers as
    float64 ``%v``, ``map[k:v ...]`` (keys sorted) and ``[a b]`` for maps and lists."""
    if value is None:
        return "<no value>"
    return _go_value(value)


def _go_value(value: JSON) -> str:
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    return go_printed(value)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}


def go_quote(value: JSON) -> str:
    """Sprig's ``quote`` of one value: Go's ``%q`` of its printed form (nothing for null)."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else _go_value(value)
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'
