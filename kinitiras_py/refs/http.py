"""The aiohttp-backed :class:`~kinitiras_py.refs.resolver.HttpClient` behind ``from: http`` references.

One :meth:`AiohttpClient.fetch` sends the request a policy's ``http`` block describes and returns
``{"body": <JSON object or array>, "header": {name: value}}``. Differences from kinitiras:

- query ``params`` are merged into a URL that already has a query (kinitiras appended a second ``?``);
- a non-2xx status, a body that is not a JSON object or array, or a body over ``max_body_bytes``
  is an error (kinitiras ignored the status and accepted only objects);
- the whole fetch (credentials, token, request, one retry) runs under one deadline, the
  client's ``default_timeout`` or the reference's ``timeoutSeconds``;
- tokens from ``authUrl`` live in memory only (:mod:`kinitiras_py.refs.tokens`), are never written
  into the policy, and a 401 from the target refreshes the token once and retries;
- credentials may come from a Secret (``auth.secretRef``) instead of the policy;
- identical successful requests within ``cache_ttl`` seconds share one answer (errors are not kept);
- every URL (target, redirect hop, ``authUrl``) and address connected to must pass the operator's
  :class:`~kinitiras_py.refs.egress.Egress` setting (:mod:`.outbound`); no redirect to another host.

No error message or log line contains a token, a password or a Basic-auth header: every message
built while credentials are in scope passes through :func:`redact`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver

from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.refs import outbound
from kinitiras_py.refs.durations import parse_duration
from kinitiras_py.refs.egress import Egress
from kinitiras_py.refs.httpblock import HttpCall, prepare
from kinitiras_py.refs.store import Store
from kinitiras_py.refs.tokens import Credentials, TokenCache, stored_token

log = logging.getLogger(__name__)

_EXCERPT = 200


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each non-empty secret replaced by ``***``."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _excerpt(raw: bytes) -> str:
    """The start of a response body on one line, for messages."""
    text = " ".join(raw[: _EXCERPT * 4].decode("utf-8", "replace").split())
    if not text:
        return "(empty body)"
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"


@dataclass(frozen=True)
class _Auth:
    """The bearer token to send; ``creds`` when it came from an auth endpoint (and can be refreshed)."""

    bearer: str
    creds: Credentials | None


@dataclass(frozen=True)
class _Answer:
    """A received response."""

    status: int
    reason: str
    headers: dict[str, str]
    raw: bytes


class AiohttpClient:
    """Performs ``from: http`` references with aiohttp; see the module docstring."""

    def __init__(self, egress: Egress | None = None, *, resolver: AbstractResolver | None = None,
                 store: Store | None = None, default_timeout: float = 1.0, cache_ttl: float = 2.0,
                 max_body_bytes: int = 1 << 20, tokens: TokenCache | None = None,
                 clock: Callable[[], float] = time.monotonic, token_clock: Callable[[], float] = time.time,
                 max_cache_entries: int = 1024) -> None:
        """``egress`` (default: no prefixes, namespaced policies refused) decides what may be called,
        ``resolver`` (default: aiohttp's) answers DNS under its guard. ``store`` reads
        ``auth.secretRef`` Secrets. ``tokens`` defaults to a :class:`TokenCache` on ``token_clock``
        (Unix seconds); ``clock`` (monotonic seconds) times the response cache."""
        self.egress = egress if egress is not None else Egress()
        self._resolver = outbound.GuardedResolver(self.egress, resolver)
        self._owned: aiohttp.ClientSession | None = None
        self._store = store
        self.default_timeout = default_timeout
        self.cache_ttl = cache_ttl
        self.max_body_bytes = max_body_bytes
        self.tokens = tokens if tokens is not None else TokenCache(self._fetch_token, clock=token_clock)
        self._clock = clock
        self._token_clock = token_clock
        self._max_cache_entries = max_cache_entries
        self._cache: OrderedDict[tuple[object, ...], tuple[float, _Answer]] = OrderedDict()

    async def __aenter__(self) -> AiohttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session and the resolver."""
        if self._owned is not None:
            await self._owned.close()
            self._owned = None
        await self._resolver.close()

    def _http(self) -> aiohttp.ClientSession:
        """The session, made on first use (it needs the running loop)."""
        if self._owned is None or self._owned.closed:
            self._owned = outbound.session(self._resolver)
        return self._owned

    async def fetch(self, spec: Obj, namespaced: bool) -> Obj:
        """Send the request ``spec`` describes (for a namespaced policy or not); return ``{"body", "header"}``.

        Raises LookupError with a message naming the method, the URL (without user info) and the
        reason: refused by the egress setting, timeout, connection failure, a redirect to another
        host, non-2xx status, oversized or non-JSON body, or no usable token.
        """
        req = prepare(spec, self.default_timeout)
        where = f"{req.method} {req.shown}"
        secrets = _inline_secrets(req.auth)
        stage = ""
        try:
            # Before the cache: an answer fetched for a cluster policy is no answer for a namespaced one.
            self.egress.check(req.url, namespaced)
            async with asyncio.timeout(req.timeout):
                key = _cache_key(req)
                answer = self._cached(key)
                if answer is not None:
                    log.debug("http reference served from cache", extra={"url": req.shown})
                    return _result(req, answer)
                stage = " while getting its bearer token"
                auth = await self._credentials(req, secrets, namespaced)
                stage = ""
                answer = await self._attempt(req, auth, namespaced)
                if answer.status == 401 and auth is not None and auth.creds is not None:
                    log.info("token refused, retrying once with a new one", extra={"url": req.shown})
                    stage = " while getting its bearer token"
                    fresh = await self.tokens.token(auth.creds, req.timeout, reject=auth.bearer)
                    secrets.append(fresh)
                    stage = ""
                    answer = await self._attempt(req, _Auth(fresh, auth.creds), namespaced)
                result = _result(req, answer)
                self._remember(key, answer)
                return result
        except TimeoutError:
            message = f"{where}: no answer within {req.timeout:g} s{stage}"
        except aiohttp.ClientError as e:
            message = f"{where}: {outbound.guarded_message(e) or f'{type(e).__name__}: {e}'}"
        except (LookupError, ValueError) as e:
            message = str(e)
            if not message.startswith((where, "response of ")):
                message = f"{where}: {message}"
        raise LookupError(redact(message, secrets))

    async def _attempt(self, req: HttpCall, auth: _Auth | None, namespaced: bool) -> _Answer:
        """Send ``req`` once (with ``auth``'s bearer token), following redirects on the same host
        that the egress setting allows, and read the answer within the size limit."""
        headers = dict(req.headers)
        if auth is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = f"Bearer {auth.bearer}"
        started = time.monotonic()
        async with outbound.following(self._http(), req.method, req.url, headers=headers, data=req.body,
                                      timeout=req.timeout,
                                      allowed=lambda url: self.egress.check(url, namespaced)) as resp:
            raw = await outbound.read_body(resp, self.max_body_bytes, req.shown)
            answer = _Answer(resp.status, resp.reason or "", outbound.headers_of(resp), raw)
        log.debug("http reference answered", extra={"method": req.method, "url": req.shown,
                                                      "status": answer.status,
                                                      "seconds": round(time.monotonic() - started, 3)})
        return answer

    async def _credentials(self, req: HttpCall, secrets: list[str], namespaced: bool) -> _Auth | None:
        """The bearer token for ``req``: ``staticToken``, else the Secret's ``token``, else one from
        ``authUrl`` (username and password inline or from the Secret; the URL held to the egress
        setting like the request's), else a non-expired ``auth.token``. Every secret value found is
        added to ``secrets``."""
        auth = req.auth
        if auth is None:
            return None
        username, password, secret_token = auth.get("username"), auth.get("password"), None
        if auth.get("secretRef") is not None:
            data = await self._secret(auth["secretRef"])
            secrets.extend(v for k, v in data.items() if k != "username")
            secrets.extend(_basic_forms(data.get("username") or username, data.get("password") or password))
            secret_token = data.get("token")
            username = data.get("username") or username
            password = data.get("password") if "password" in data else password
        if auth.get("staticToken"):
            return _Auth(str(auth["staticToken"]), None)
        if secret_token:
            return _Auth(secret_token, None)
        if auth.get("authUrl"):
            if not username:
                raise LookupError("auth.authUrl is set but there is no username (inline or in the secretRef Secret)")
            expire = auth.get("expireDuration")
            try:
                lifetime = parse_duration(expire) if expire else None
            except ValueError as e:
                raise LookupError(f"auth.expireDuration: {e}") from None
            self.egress.check(str(auth["authUrl"]), namespaced)
            creds = Credentials(str(auth["authUrl"]), str(username), str(password or ""), lifetime)
            token = await self.tokens.token(creds, req.timeout)
            secrets.append(token)
            return _Auth(token, creds)
        if auth.get("token"):
            return _Auth(stored_token(str(auth["token"]), auth.get("expireAt"), self._token_clock()), None)
        raise LookupError("auth has no usable token: set staticToken, secretRef, or authUrl with a username")

    async def _secret(self, ref: JSON) -> dict[str, str]:
        """The string data of the Secret ``ref`` names ({name, namespace})."""
        if not isinstance(ref, dict) or not ref.get("name"):
            raise LookupError("auth.secretRef needs a name")
        name, namespace = str(ref["name"]), ref.get("namespace")
        if not namespace:
            raise LookupError(f"auth.secretRef {name} has no namespace")
        if self._store is None:
            raise LookupError(f"auth.secretRef {namespace}/{name}: Secrets cannot be read here")
        secret = await self._store.get("v1", "Secret", str(namespace), name)
        if secret is None:
            raise LookupError(f"auth.secretRef: Secret {namespace}/{name} not found")
        out: dict[str, str] = {}
        for key in ("username", "password", "token"):
            encoded = (secret.get("data") or {}).get(key)
            if encoded is not None:
                try:
                    out[key] = base64.b64decode(str(encoded), validate=True).decode()
                except ValueError:
                    raise LookupError(f"auth.secretRef: Secret {namespace}/{name} key {key} is not "
                                      "base64-encoded UTF-8") from None
            elif isinstance((secret.get("stringData") or {}).get(key), str):
                out[key] = secret["stringData"][key]
            if key in out:
                out[key] = out[key].rstrip("\r\n")
        return out

    async def _fetch_token(self, creds: Credentials, timeout: float) -> JSON:
        """POST ``creds.auth_url`` with Basic auth, redirects not followed; the parsed JSON answer (for
        :class:`TokenCache`)."""
        who = f"token endpoint for {creds.describe()}"
        secrets = [creds.password, *_basic_forms(creds.username, creds.password)]
        if ":" in creds.username:
            raise LookupError(f"{who}: a Basic-auth username cannot contain ':'")
        basic = "Basic " + _basic(creds.username, creds.password)
        try:
            async with self._http().post(creds.auth_url, headers={"Authorization": basic}, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                raw = await outbound.read_body(resp, self.max_body_bytes, who)
                if not 200 <= resp.status < 300:
                    raise LookupError(redact(f"{who} answered {resp.status} {resp.reason or ''}: "
                                             f"{_excerpt(raw)}", secrets))
        except aiohttp.ClientError as e:
            reason = outbound.guarded_message(e) or f"{type(e).__name__}: {e}"
            raise LookupError(redact(f"{who}: {reason}", secrets)) from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise LookupError(redact(f"{who} did not answer JSON: {_excerpt(raw)}", secrets)) from None

    def _cached(self, key: tuple[object, ...]) -> _Answer | None:
        """A cached answer for ``key`` that has not expired."""
        if self.cache_ttl <= 0:
            return None
        hit = self._cache.get(key)
        if hit is None:
            return None
        if hit[0] <= self._clock():
            del self._cache[key]
            return None
        return hit[1]

    def _remember(self, key: tuple[object, ...], answer: _Answer) -> None:
        """Keep a successful answer for ``cache_ttl`` seconds (bounded, oldest dropped first)."""
        if self.cache_ttl <= 0:
            return
        now = self._clock()
        self._cache[key] = (now + self.cache_ttl, answer)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_cache_entries or next(iter(self._cache.values()))[0] <= now:
            self._cache.popitem(last=False)


def _inline_secrets(auth: Obj | None) -> list[str]:
    """Secret values written in the policy's ``auth`` block (to keep out of messages)."""
    if not auth:
        return []
    found = [str(auth[k]) for k in ("staticToken", "password", "token") if auth.get(k)]
    return found + _basic_forms(auth.get("username"), auth.get("password"))


def _basic_forms(username: JSON, password: JSON) -> list[str]:
    """The Basic-auth encoding of ``username:password`` (an echoing server would show it)."""
    return [_basic(username, password)] if password else []


def _basic(username: JSON, password: JSON) -> str:
    """base64 of ``username:password`` (the Basic-auth credential)."""
    return base64.b64encode(f"{username or ''}:{password or ''}".encode()).decode()


def _cache_key(req: HttpCall) -> tuple[object, ...]:
    """Identical requests: method, URL with query, headers, body and (a digest of) the auth block."""
    auth = hashlib.sha256(orjson.dumps(req.auth, option=orjson.OPT_SORT_KEYS)).hexdigest() if req.auth else ""
    return req.method, str(req.url), tuple(sorted(req.headers.items())), req.body, auth


def _result(req: HttpCall, answer: _Answer) -> Obj:
    """``{"body", "header"}`` for a 2xx answer with a JSON object or array; LookupError otherwise."""
    if not 200 <= answer.status < 300:
        raise LookupError(f"{req.method} {req.shown} answered {answer.status} {answer.reason}: "
                          f"{_excerpt(answer.raw)}")
    try:
        body = orjson.loads(answer.raw)
    except orjson.JSONDecodeError:
        raise LookupError(f"response of {req.shown} is not JSON: {_excerpt(answer.raw)}") from None
    if not isinstance(body, dict | list):
        raise LookupError(f"response of {req.shown} is not a JSON object or array: {_excerpt(answer.raw)}")
    return {"body": body, "header": dict(answer.headers)}
