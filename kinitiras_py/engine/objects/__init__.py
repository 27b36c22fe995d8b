"""The object under admission as JSON, and changes to it.

What belongs here knows objects, not policies: how a field is named (:mod:`.fieldpath`), where a
kind keeps its pod spec (:mod:`.workloads`), which objects a selector matches (:mod:`.selectors`),
RFC 6902 patches applied to an object (:mod:`.patching`), the copy-on-write drafts the rules write
to and the response patch built from them (:mod:`.patchlog`), and the last-applied annotation
patched like its object (:mod:`.lastapplied`). Nothing here imports another room of the engine.
"""
