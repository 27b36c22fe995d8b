"""Value references (current, old, k8s, owner, http), resolved before rules run.

Lookups go through the :class:`~kinitiras_py.refs.resolver.Store` and
:class:`~kinitiras_py.refs.resolver.HttpClient` protocols: the offline CLI passes static
implementations, the webhook passes informer- and aiohttp-backed ones.
"""
