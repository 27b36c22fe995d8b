"""Every YAML the CLI prints: JSON values written so that any YAML reader reads them back as the
same JSON, kubectl (go-yaml v2, YAML 1.1) and YAML 1.2 readers alike.

PyYAML quotes a string only when its own YAML 1.1 resolver would read it as something else, so
``y``, ``n`` (booleans for go-yaml v2), ``1e3`` and ``0o12`` (numbers in YAML 1.2) came out bare.
Here a string is also quoted when it looks like a boolean, a null or a number to any of those
readers. Multi-line strings (rendered CEL) are literal blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml

from kinitiras_py.base.typedefs import JSON

# Words some YAML reader takes for a boolean or a null (compared in lower case).
_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ""})
# Anything a YAML 1.1 or 1.2 reader may take for a number or a timestamp: signed or not, decimal,
# hex, octal (0o and 0-prefixed), binary, underscores, sexagesimal (1:20), exponents with or
# without a fraction, .inf and .nan; a date or time is anything starting with digits and a dash.
_NUMBER = re.compile(r"[-+]?(\.?[0-9][0-9_:.]*([eE][-+]?[0-9_]+)?|0[xXoObB][0-9a-fA-F_]+|\.(inf|nan))",
                     re.IGNORECASE)
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")
# Line breaks other than \n, which PyYAML folds or normalises outside double quotes.
_BREAKS = re.compile("[\r\x85\u2028\u2029]")


def ambiguous(text: str) -> bool:
    """Whether some YAML reader would read ``text``, written bare, as a non-string."""
    return text.lower() in _WORDS or bool(_NUMBER.fullmatch(text) or _TIMESTAMP.match(text))


class _Dumper(yaml.SafeDumper):
    """Safe YAML whose strings read back as strings everywhere."""

    def ignore_aliases(self, data: Any) -> bool:
        """Write shared values out in full (a patch shares its values with the object): no anchors."""
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _BREAKS.search(value) or ambiguous(value):
        style: str | None = '"'
    else:
        style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(value: JSON, sort_keys: bool = False) -> str:
    """One YAML document, keys in their given order unless ``sort_keys``."""
    text: str = yaml.dump(value, Dumper=_Dumper, sort_keys=sort_keys, width=120, allow_unicode=True)
    return text


def dump_yaml_all(values: Iterable[Any]) -> str:
    """Several YAML documents separated by ``---``."""
    text: str = yaml.dump_all(list(values), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    return text
