"""Type aliases named once and shared by all layers."""

from typing import Any, Literal

JSON = Any
"""Any JSON value as decoded by orjson/json: dict, list, str, int, float, bool or None."""

Obj = dict[str, Any]
"""A Kubernetes object or any JSON object, kept as a plain dict."""

Patch = list[dict[str, Any]]
"""An RFC 6902 JSON patch: a list of ``{"op", "path", "value"?, "from"?}`` dicts."""

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
OPERATIONS: tuple[Operation, ...] = ("CREATE", "UPDATE", "DELETE", "CONNECT")
