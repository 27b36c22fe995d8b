"""The response patch, built from the changes the rules made rather than by diffing objects.

Rules never write to the received object. Each rule works on a :class:`Draft`: every change
(rendered and ``cel`` ops, ``plaintext`` ops, origin entries, all applied by
:mod:`.patching`) first copies, shallowly, the containers on its way that the rule does not own
yet (copy-on-write). A failing rule is dropped with its draft and leaves no trace; the object
before it is intact. Parts no rule touched stay the received object's own, by identity.

A draft also notes *where* it changed the document, in that document's coordinates:

* ``add``/``remove`` inside an array note the **array**: they shift the indexes after them, so
  the array's items no longer correspond to the received ones by position;
* every other change notes its own path (``replace`` of an array item keeps the positions).

The drafts of the rules that held are merged, in order, into a :class:`PatchLog`: a trie of
paths where a noted path covers everything below it. The invariant that makes its paths valid
for the received object: no noted path goes through an array whose items moved, or through a
value that was replaced, moved or created, because such a change notes that array or value
itself, which then covers every path below it (noted before or after).

:meth:`PatchLog.patch` walks the trie over the received and the final object side by side and
emits, for each noted path, the ops turning the received value there into the final one
(``_fixups``). Where the two sides stop being the same kind of container on the way down (a
parent created by a lenient ``add``, a subtree replaced by a scalar), it emits there instead.
Below a noted path the two values are compared, not diffed as a whole: objects key by key,
arrays by their common head and tail, with the middle added, removed, changed item by item
(same length) or replaced (when items were both added and removed, their identity is
ambiguous). Untouched subtrees are skipped by identity, so the cost follows what changed, not
the object's size.

Properties, each exercised by ``tests/unit/engine/test_patch_from_ops.py``:

* strict RFC 6902 application of the patch to the received object gives the final object;
* the ops target disjoint paths (array items in an order that keeps later ones valid), so no op
  undoes, overwrites or re-targets another: add-then-remove, repeated replaces, children of a
  later-replaced parent all collapse;
* a noted path whose value ends up as received emits nothing, so running the policies on our
  own output yields an empty patch;
* the order is deterministic: the trie keeps the order in which paths were first noted.
"""

from __future__ import annotations

from typing import Any

from kinitiras_py.base import nesting
from kinitiras_py.base.errors import PatchError
from kinitiras_py.base.typedefs import JSON, Patch
from kinitiras_py.engine.objects import patching

_MISSING: Any = object()
_CONTAINERS = (dict, list)
_Trie = dict[str, Any]
"""Reference token -> child trie, or None where the whole subtree was touched."""


class Draft:
    """One rule's changes over a document it must not modify: copy-on-write, paths noted."""

    __slots__ = ("_owned", "base", "doc", "sources", "touched")

    def __init__(self, base: JSON) -> None:
        self.base = base
        self.doc = base
        """The document with the changes so far; ``base`` itself until the first change."""
        self.touched: list[tuple[str, ...]] = []
        """Where the changes were made, in order (see the module docstring)."""
        self.sources: list[tuple[str, ...]] = []
        """Where operations read the document besides where they changed it: the source of a copy
        or move, the path of a test (the root when the pointer cannot be read)."""
        # Containers this draft copied, by id, kept alive so that no id is reused meanwhile:
        # only these may be changed in place.
        self._owned: dict[int, JSON] = {}

    @property
    def changed(self) -> bool:
        """Whether any change was made (possibly leaving the value as it was)."""
        return bool(self.touched)

    def apply(self, ops: Patch) -> JSON:
        """Apply RFC 6902 ``ops`` (with :mod:`.patching`'s leniencies); return the document.

        Raises ``PatchError`` like :func:`.patching.apply_ops_in_place`; the draft must then be
        dropped.
        """
        if type(ops) is not list:
            self.doc = patching.apply_ops_in_place(self.doc, ops, self._before)
            return self.doc
        for i, op in enumerate(ops):
            if not self._set(op):
                self._note_source(op)
                try:
                    self.doc = patching.apply_ops_in_place(self.doc, [op], self._before)
                except PatchError as e:  # numbered as in ``ops``
                    raise PatchError(e.reason, i, e.path) from None
        return self.doc

    def _note_source(self, op: object) -> None:
        """Note where ``op`` reads the document, if it is a copy, a move or a test."""
        if type(op) is not dict or op.get("op") not in ("copy", "move", "test"):
            return
        tokens = patching.pointer_tokens(op.get("path" if op["op"] == "test" else "from"))
        self.sources.append(() if tokens is None else tuple(tokens))

    def _set(self, op: object) -> bool:
        """The common operation at C-ish speed: an ``add`` or ``replace`` of a member of an
        object reached through existing objects and array items. Applies it as :mod:`.patching`
        would (the value copied, the containers on the way owned, the path noted) and returns
        True; False, having changed nothing but ownership, for any other operation, which then
        takes the general way (with its errors and leniencies)."""
        if type(op) is not dict or len(op) != 3 or "value" not in op:
            return False
        kind = op.get("op")
        if kind != "add" and kind != "replace":
            return False
        tokens = patching.pointer_tokens(op.get("path"))
        if tokens is None:
            return False
        doc = self.doc
        value = op["value"]
        if type(value) is dict or type(value) is list:
            if patching.too_deep(len(tokens), value) is not None:
                return False  # the general way says why
            value = patching.clone(value)
        elif len(tokens) > nesting.MAX_DEPTH:  # too_deep's answer for a scalar, without the call
            return False
        if type(doc) is not dict:
            return False
        owned = self._owned
        if id(doc) not in owned:
            self.doc = doc = self._own(doc)
        node: Any = doc
        child: Any
        last = tokens.pop()
        for token in tokens:
            if type(node) is dict:
                child = node.get(token)
                key: str | int = token
            elif patching.is_index(token) and int(token) < len(node):
                key = int(token)
                child = node[key]
            else:
                return False
            container = type(child)
            if container is not dict and container is not list:
                return False
            if id(child) not in owned:
                child = container(child)  # copied once per rule; in place from then on
                owned[id(child)] = child
                node[key] = child
            node = child
        if type(node) is not dict:
            return False
        node[last] = value
        tokens.append(last)
        self.touched.append(tuple(tokens))
        return True

    def _own(self, value: dict[str, JSON] | list[JSON]) -> dict[str, JSON] | list[JSON]:
        if id(value) in self._owned:
            return value
        copy: dict[str, JSON] | list[JSON] = dict(value) if isinstance(value, dict) else list(value)
        self._owned[id(copy)] = copy
        return copy

    def _before(self, doc: JSON, change: str, tokens: list[str]) -> JSON:
        """Own the containers from the root to the parent of ``tokens``; note the change."""
        owned = self._owned
        if isinstance(doc, _CONTAINERS) and id(doc) not in owned:
            doc = self._own(doc)
        node: JSON = doc
        for i in range(len(tokens) - 1):
            key = _key(node, tokens[i])
            child = _MISSING if key is None else node[key]
            if not isinstance(child, _CONTAINERS):
                # Missing (the lenient add creates objects there), null or a scalar: nothing to own.
                node = _MISSING
                break
            if id(child) not in owned:  # copied once per rule; in place from then on
                node[key] = child = self._own(child)
            node = child
        shifts = tokens and change != "replace" and isinstance(node, list)
        self.touched.append(tuple(tokens[:-1] if shifts else tokens))
        return doc


def _key(node: JSON, token: str) -> str | int | None:
    """The key ``token`` names in ``node`` if ``node`` holds it, else None."""
    if type(node) is dict or isinstance(node, dict):
        return token if token in node else None
    if isinstance(node, list) and patching.is_index(token) and int(token) < len(node):
        return int(token)
    return None


class PatchLog:
    """The paths the committed rules changed, as a trie; emits the response patch."""

    __slots__ = ("_root",)

    def __init__(self) -> None:
        self._root: _Trie | None = {}

    def record(self, draft: Draft) -> None:
        """Merge a rule's noted paths (the rule held: its changes are part of the result)."""
        for path in draft.touched:
            self._note(path)

    def _note(self, path: tuple[str, ...]) -> None:
        node = self._root
        if node is None:
            return
        if not path:
            self._root = None
            return
        for token in path[:-1]:
            node = node.setdefault(token, {})
            if node is None:  # an ancestor is already noted whole
                return
        node[path[-1]] = None  # covers (and forgets) anything noted below it

    def patch(self, original: JSON, final: JSON) -> Patch:
        """The RFC 6902 patch taking ``original`` (the received object) to ``final``.

        ``final`` must be what the recorded drafts made of ``original``, in order.
        """
        out: Patch = []
        if original is not final:
            _emit(self._root, original, final, "", out)
        return out


def difference(original: JSON, final: JSON) -> Patch:
    """RFC 6902 operations turning ``original`` into ``final``, for a rule whose result is a whole
    object (a JavaScript ``Result``); the rule's draft applies them like any other operations."""
    out: Patch = []
    _fixups(original, final, "", out)
    return out


def same(a: JSON, b: JSON) -> bool:
    """Strict JSON equality: ``1``, ``1.0`` and ``true`` differ; shared subtrees are skipped."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return len(a) == len(b) and all(key in b and same(value, b[key]) for key, value in a.items())
    if kind is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _emit(node: _Trie | None, original: JSON, final: JSON, path: str, out: Patch) -> None:
    kind = type(original)
    if node is None or kind is not type(final) or (kind is dict) == (kind is list):
        _fixups(original, final, path, out)
        return
    if kind is list:
        if len(original) != len(final):
            _fixups(original, final, path, out)
            return
        for token, child in node.items():
            # Paths noted by a lenient no-op (a remove past the end) lead nowhere: nothing changed.
            if patching.is_index(token) and (i := int(token)) < len(final):
                before, after = original[i], final[i]
                if before is not after:
                    _emit(child, before, after, f"{path}/{token}", out)
        return
    for token, child in node.items():
        before, after = original.get(token, _MISSING), final.get(token, _MISSING)
        if before is after:  # untouched subtrees are skipped by identity
            continue
        at = f"{path}/{_escaped(token)}"
        if child is not None:
            _emit(child, before, after, at, out)
        elif type(after) is str and type(before) is str:  # a leaf the rules set: _fixups' answer, sooner
            if before != after:
                out.append({"op": "replace", "path": at, "value": after})
        else:
            _fixups(before, after, at, out)


def _escaped(token: str) -> str:
    """:func:`.patching.escape_pointer_token`, without its two copies for the tokens that need none."""
    return token if "~" not in token and "/" not in token else patching.escape_pointer_token(token)


def _fixups(original: JSON, final: JSON, path: str, out: Patch) -> None:
    """Append the ops turning ``original`` into ``final`` at ``path`` (either may be missing)."""
    if original is final:
        return
    if original is _MISSING:
        out.append({"op": "add", "path": path, "value": final})
    elif final is _MISSING:
        out.append({"op": "remove", "path": path})
    elif type(original) is dict and type(final) is dict:
        # Key by key, also at the root: the API server may refuse to replace a whole object.
        out.extend({"op": "remove", "path": f"{path}/{_escaped(key)}"} for key in original if key not in final)
        for key, value in final.items():
            _fixups(original.get(key, _MISSING), value, f"{path}/{_escaped(key)}", out)
    elif type(original) is list and type(final) is list:
        _list_fixups(original, final, path, out)
    elif not same(original, final):
        out.append({"op": "replace", "path": path, "value": final})


def _list_fixups(original: list[JSON], final: list[JSON], path: str, out: Patch) -> None:
    """Arrays: keep the common head and tail, patch the middle."""
    n, m = len(original), len(final)
    head = 0
    while head < n and head < m and same(original[head], final[head]):
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and same(original[n - 1 - tail], final[m - 1 - tail]):
        tail += 1
    removed, added = n - head - tail, m - head - tail
    if removed == added:
        for i in range(head, head + added):
            _fixups(original[i], final[i], f"{path}/{i}", out)
    elif removed == 0:
        out.extend({"op": "add", "path": f"{path}/{i}", "value": final[i]} for i in range(head, head + added))
    elif added == 0:
        # From the last: each index is still the received item's when it is removed.
        out.extend({"op": "remove", "path": f"{path}/{i}"} for i in reversed(range(head, head + removed)))
    else:
        out.append({"op": "replace", "path": path, "value": final})
