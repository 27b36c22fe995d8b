"""The structural OpenAPI v3 schema of a declared model, as a CustomResourceDefinition needs it.

The other reading of a :mod:`.schema` declaration (the parser is the first): each field's type,
enum, pattern, format, default and ``minItems`` become schema keywords. Checks the schema cannot
express (``Check`` extras, ``Model.problems``) are the parser's alone.
"""

from __future__ import annotations

import copy

from kinitiras_py.api.schema import FieldSpec, Model, Node, fields_of
from kinitiras_py.base.typedefs import Obj


def openapi(cls: type[Model]) -> Obj:
    """The structural OpenAPI v3 schema of a model (an object node, without a description)."""
    return _schema(Node("object", model=cls))


def _schema(node: Node) -> Obj:
    if node.kind == "object":
        assert node.model is not None
        properties = {f.json: _property(f) for f in fields_of(node.model)}
        out: Obj = {"type": "object", "properties": properties}
        if node.model.OPEN:  # its other fields are someone else's (a volume's source): keep them
            out["x-kubernetes-preserve-unknown-fields"] = True
        required = [f.json for f in fields_of(node.model) if f.prop.required]
        if required:
            out["required"] = required
        return out
    if node.kind == "array":
        assert node.item is not None
        return {"type": "array", "items": _schema(node.item)}
    if node.kind == "map":
        assert node.item is not None
        return {"type": "object", "additionalProperties": _schema(node.item)}
    if node.kind == "any":
        return {"x-kubernetes-preserve-unknown-fields": True}
    if node.kind == "int-or-string":
        out = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    else:
        out = {"type": node.kind}
    if node.format:
        out["format"] = node.format
    if node.enum:
        out["enum"] = list(node.enum)
    if node.pattern:
        out["pattern"] = node.pattern.regex
    return out


def _property(f: FieldSpec) -> Obj:
    out: Obj = {"description": f.prop.description, **_schema(f.node)}
    if f.prop.has_default:
        out["default"] = copy.deepcopy(f.prop.default)
    if f.prop.min_items is not None:
        out["minItems"] = f.prop.min_items
    return out
