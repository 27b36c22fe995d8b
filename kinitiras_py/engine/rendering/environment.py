"""The jinja2 environment for rule templates and the filters that turn values into CEL.

User-supplied text reaches CEL only through :func:`cel_literal` (and :func:`ref_expr` for
paths), so a quote, backslash or newline in a label value can never change the program.
"""

from __future__ import annotations

import math
from pathlib import Path

import jinja2

from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.objects import fieldpath, workloads

TEMPLATE_DIR = Path(__file__).with_name("templates")

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def cel_string(text: str) -> str:
    """A double-quoted CEL string literal for ``text``."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def cel_literal(value: JSON) -> str:
    """A CEL literal for a JSON value (the checker accepts mixed element types in literals)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no JSON form")
        return repr(value)
    if isinstance(value, str):
        return cel_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(cel_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel_string(str(k))}: {cel_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as CEL")


def ref_root(ref: ResourceRefer, param: str) -> str:
    """The optional CEL expression of a value reference's root object."""
    source = ref.from_ or "current"
    if source == "current":
        return "optional.of(object)"
    if source == "old":
        return "(oldObject == null ? optional.none() : optional.of(oldObject))"
    return f"params[?{cel_string(param)}]"


def ref_expr(ref: ResourceRefer, param: str) -> str:
    """The optional CEL expression reading ``ref.path`` under the reference's root."""
    tokens = list(fieldpath.parse_path(ref.path) if ref.path else ())
    if ref.from_ == "http" and tokens[:1] not in (["body"], ["header"]):
        # Responses are {body, header}; kinitiras made users write `body.` first (a common slip).
        tokens.insert(0, "body")
    expr = ref_root(ref, param)
    for token in tokens:
        expr += f"[?{token}]" if isinstance(token, int) else f"[?{cel_string(token)}]"
    return expr


def pod_spec_shapes() -> list[tuple[str, tuple[str, ...]]]:
    """(JSON pointer, keys) of every place a pod spec can be, in the kind table's order."""
    shapes = dict.fromkeys(workloads.POD_TEMPLATE_PATHS.values())
    return [(fieldpath.to_pointer(keys), keys) for keys in shapes]


def pod_spec_at(api_version: str, kind: str) -> str:
    """The JSON pointer of the pod spec of objects of this apiVersion and kind (as
    ``workload.podSpecPath`` answers), for a template to write down instead of calling it."""
    keys = workloads.kind_pod_spec_path(api_version, kind)
    if keys is None:
        raise ValueError(f"{api_version} {kind} carries no pod spec")
    return fieldpath.to_pointer(keys)


def make_environment() -> jinja2.Environment:
    """A sandboxed environment: strict undefined, no HTML escaping, CEL filters."""
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, autoescape=False,
    )
    env.filters["cel"] = cel_literal
    env.filters["cel_str"] = lambda v: cel_string(str(v))
    env.filters["ptr"] = lambda v: fieldpath.to_pointer((str(v),))[1:]  # one escaped JSON pointer token
    env.globals["pod_spec_shapes"] = pod_spec_shapes
    env.globals["pod_spec_at"] = pod_spec_at
    env.globals["ref_expr"] = ref_expr
    return env
