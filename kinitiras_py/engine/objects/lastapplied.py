"""The ``kubectl.kubernetes.io/last-applied-configuration`` annotation patched like its object.

``kubectl apply`` compares what it applies with this annotation; an object changed at
admission and not its annotation makes the next apply undo the change. KubeMod therefore
applies a ModRule's patch to the annotation's JSON as well, and so does a rule with
``patchLastApplied``. Each operation that cannot apply to the annotation (a path the recorded
configuration lacks) is skipped: the annotation records what the user wrote, not the whole
object. The JSON is written back with sorted keys, as kubectl writes it.
"""

from __future__ import annotations

import orjson

from kinitiras_py.base.errors import PatchError
from kinitiras_py.base.typedefs import Patch
from kinitiras_py.engine.objects import patching, patchlog

ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
POINTER = "/metadata/annotations/" + patching.escape_pointer_token(ANNOTATION)


def follow(draft: patchlog.Draft, ops: Patch) -> None:
    """Apply ``ops`` (already applied to ``draft``'s object) to its annotation, when it has one."""
    meta = draft.doc.get("metadata") if isinstance(draft.doc, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    text = annotations.get(ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(text, str):
        return
    try:
        recorded = orjson.loads(text)
    except orjson.JSONDecodeError:
        return
    if not isinstance(recorded, dict):
        return
    config = orjson.loads(text)
    for op in ops:
        if not isinstance(op, dict) or op.get("path") == POINTER:
            continue
        try:
            config = patching.apply_ops_in_place(config, [op])
        except PatchError:
            continue
    if patchlog.same(config, recorded):
        return
    written = orjson.dumps(config, option=orjson.OPT_SORT_KEYS).decode() + ("\n" if text.endswith("\n") else "")
    draft.apply([{"op": "replace", "path": POINTER, "value": written}])
