"""An async, read-mostly view of the cluster, kept as plain dicts.

What belongs here: the API connection and REST mapping (``client``), list+watch caches
(``informers``), the informer-backed object store the value references read (``store``), the
policy watch that compiles policies into the request-path indexes (``policywatch``) and the
writer of policy status and Events (``status``).

What does not: evaluating policies (``engine``, which never imports this package), resolving
references (``refs``, which reaches objects only through its ``Store`` protocol) and HTTP serving
(``webhook``). Nothing here imports ``refs``, ``admission`` or ``webhook``.
"""
