"""Value references (current, old, k8s, owner, http), resolved before rules run.

Lookups go through the :class:`~kinitiras_py.refs.store.Store` and
:class:`~kinitiras_py.refs.resolver.HttpClient` protocols: the offline CLI passes static
implementations, the webhook passes informer- and aiohttp-backed ones. What http references
may call is the operator's setting (:mod:`.egress`), which both enforce; the webhook's
connections go only to the addresses it checked (:mod:`.outbound`).
"""
