"""The http references a policy may not make, found when the policy is admitted.

The operator's :class:`~kinitiras_py.refs.egress.Egress` setting judges each ``url`` and
``auth.authUrl`` as written. A ``{{path}}`` placeholder is judged as a plain word: a placeholder
in the host can then match no allowed prefix, one in the path passes here and the filled URL is
judged again on every request (:meth:`Egress.check` in :mod:`kinitiras_py.refs.http`).
"""

from __future__ import annotations

import re

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.engine.policies.compiled import AnyPolicy
from kinitiras_py.refs.egress import Egress, EgressRefused

_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")


def refused(compiled: AnyPolicy, egress: Egress) -> list[PolicyError]:
    """One error per URL of ``compiled`` that ``egress`` forbids, naming its field."""
    namespaced = not compiled.cluster_scoped
    errors: list[PolicyError] = []
    for path, http in compiled.http_refs:
        auth = http.get("auth")
        urls = [("url", http.get("url"))]
        if isinstance(auth, dict):
            urls.append(("auth.authUrl", auth.get("authUrl")))
        for name, url in urls:
            if not isinstance(url, str):
                continue  # the schema check has refused it
            try:
                egress.check(_PLACEHOLDER.sub("placeholder", url), namespaced)
            except EgressRefused as e:
                errors.append(PolicyError(f"{path}.http.{name}", f"{url} is refused: {e.reason}"))
    return errors


def check(compiled: AnyPolicy, egress: Egress) -> None:
    """Raise PolicyErrors naming the policy and every forbidden URL's field, if any."""
    errors = refused(compiled, egress)
    if errors:
        raise PolicyErrors(errors, compiled.ref)
