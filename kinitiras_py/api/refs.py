"""Value references (``valueRef``, ``dataRef``): where a rule reads a value from at admission time,
the current or old object, its owner, another object in the cluster, or an HTTP endpoint."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from kinitiras_py.api.core import Timestamp
from kinitiras_py.api.schema import Check, Model, OneOf, Pattern, prop
from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.base.urls import parse_url

REF_SOURCES = ("current", "old", "k8s", "owner", "http")
HTTP_METHODS = ("GET", "POST")

DURATION_PATTERN = r"^\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|ms|s|m|h))+)$"
Duration = Annotated[str, Pattern(DURATION_PATTERN, "a duration such as 90s, 10m or 1h30m (not negative)")]
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")


def url_problem(text: str) -> str | None:
    """Why ``text`` cannot be called (it must be an absolute http or https URL), or None.
    ``{{path}}`` placeholders count as text; the filled URL is checked again on each request."""
    try:
        url = parse_url(_PLACEHOLDER.sub("placeholder", text))
    except (ValueError, TypeError) as e:
        return f"{text!r} is not a URL: {e}"
    if url.scheme not in ("http", "https") or not url.host:
        return f"{text!r} is not an absolute http or https URL"
    return None


Url = Annotated[str, Check(url_problem)]


@dataclass(frozen=True, kw_only=True)
class SecretRef(Model):
    """A Secret holding HTTP credentials: key ``token`` for a static bearer token, or keys
    ``username`` and ``password`` for the token endpoint."""

    name: str = prop("Name of the Secret.", required=True)
    namespace: str | None = prop("Namespace of the Secret; defaults to the policy's namespace "
                                 "(cluster-scoped policies must set it). A namespaced policy may "
                                 "name only its own.")


@dataclass(frozen=True, kw_only=True)
class HttpAuth(Model):
    """How to obtain the bearer token sent with the request."""

    static_token: str | None = prop("A fixed bearer token; takes precedence over every other way.")
    username: str | None = prop("User name sent with Basic auth to authUrl.")
    password: str | None = prop("Password sent with Basic auth to authUrl.")
    secret_ref: SecretRef | None = prop("A Secret holding the token or the username and password, "
                                        "instead of writing them in the policy.")
    auth_url: Url | None = prop('Endpoint that answers a POST with {"token": "..."}.')
    expire_duration: Duration | None = prop("How long a fetched token is used when the endpoint does "
                                            "not say, e.g. 10m.")
    token: str | None = prop("Latest fetched token; written by the controller, do not edit.")
    expire_at: Timestamp | None = prop("When token expires; written by the controller, do not edit.")


@dataclass(frozen=True, kw_only=True)
class HttpDataRef(Model):
    """An HTTP request whose JSON answer is the referenced data (read it under body.)."""

    url: Url = prop("URL to call; may contain one {{path}} placeholder filled from the object.",
                    required=True)
    method: Annotated[str, OneOf(HTTP_METHODS)] | None = prop("HTTP method; empty means GET.")
    header: dict[str, str] = prop("Headers sent as they are.", factory=dict)
    params: dict[str, str] = prop("Query parameters; each value may contain one {{path}} "
                                  "placeholder.", factory=dict)
    body: Any = prop("JSON body sent with POST.")
    auth: HttpAuth | None = prop("Bearer-token authentication.")
    timeout_seconds: int | None = prop("How long to wait for the answer (whole seconds, at most 30); "
                                         "default 1.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """The timeout must be positive and at most 30 s (the webhook answers within 3 s anyway)."""
        if self.timeout_seconds is not None and not 0 < self.timeout_seconds <= 30:
            yield "timeoutSeconds", "must be greater than 0 and at most 30"


@dataclass(frozen=True, kw_only=True)
class ResourceRefer(Model):
    """Where a value comes from."""

    from_: Annotated[str, OneOf(REF_SOURCES)] = prop(
        "current or old object, its first owner, another object (k8s), or an HTTP answer.",
        required=True)
    path: str | None = prop("Path of the value in the source: /spec/replicas, or "
                            "body.result.x for http; may be empty for owner.")
    k8s: ResourceSelector | None = prop("The object to read when from is k8s; name, namespace and "
                                        "label values may contain one {{path}} placeholder. A "
                                        "namespaced policy reads only in its own namespace (the "
                                        "default) and its own Namespace object.")
    http: HttpDataRef | None = prop("The request to make when from is http.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """``from: k8s`` needs ``k8s`` and ``from: http`` needs ``http`` (kinitiras crashed)."""
        if self.from_ == "k8s" and self.k8s is None:
            yield "k8s", 'required when from is "k8s"'
        if self.from_ == "http" and self.http is None:
            yield "http", 'required when from is "http"'

