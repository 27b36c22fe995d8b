"""The /mutate and /validate endpoints: decode, run admission under a deadline, encode."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from kinitiras_py.admission import answers, policies
from kinitiras_py.admission.engine import Engine
from kinitiras_py.base.errors import ReviewError
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.results import RuleFailure
from kinitiras_py.reports.admission import AdmissionFeed
from kinitiras_py.webhook import body, codec
from kinitiras_py.webhook.deadlines import Deadlines
from kinitiras_py.webhook.metrics import Metrics

log = logging.getLogger("kinitiras_py.webhook")
JSON_TYPE = "application/json"


@dataclass
class Handlers:
    """Request handlers over one admission engine (its policies, references and caches)."""

    engine: Engine
    metrics: Metrics
    deadline: float = 2.5
    """Answer before the API server's webhook timeout (3 s by default), whatever happens."""
    ready: Callable[[], bool] = lambda: True
    on_rule_failure: Callable[[RuleFailure], None] | None = None
    on_policy_admitted: Callable[[CompiledPolicy], None] | None = None
    """Told of each valid policy being admitted (e.g. to start widening the webhook rules); it must
    return at once: nothing slow runs inside the request's deadline."""
    findings: AdmissionFeed | None = None
    """Where allowed validations go for the PolicyReports (queued at once, reported off the request's path)."""
    failure_policy: str = "Fail"
    """The failurePolicy the webhook is registered with. A request stopped by the deadline or an
    internal error is answered as the API server treats a failed call under it: Ignore admits the
    object unchanged (with a warning saying why), Fail denies it."""

    def __post_init__(self) -> None:
        self._deadlines = Deadlines()
        self.metrics.caches.engine = self.engine

    def _respond(self, endpoint: str, body: bytes, code: int, started: float) -> web.Response:
        self.metrics.requests.answered(endpoint, code, time.perf_counter() - started)
        return web.Response(body=body, content_type=JSON_TYPE)

    async def mutate(self, request: web.Request) -> web.Response:
        """POST /mutate: policies get their templates rendered; other objects get overridden."""
        return await self._handle(request, "mutate")

    async def validate(self, request: web.Request) -> web.Response:
        """POST /validate: policies are checked; every object meets the validate policies."""
        return await self._handle(request, "validate")

    async def _handle(self, request: web.Request, endpoint: str) -> web.Response:
        started = time.perf_counter()
        data, complete = await body.read_body(request)
        if not complete:
            api_version, uid = codec.peek_uid(data, complete=False)
            message = f"the admission request exceeds {body.MAX_BODY_BYTES} bytes"
            log.warning("admission request too large", extra={"endpoint": endpoint, "uid": uid})
            return self._respond(endpoint, codec.denied(api_version, uid, message, 413), 413, started)
        try:
            body.check_content_type(request)
        except ReviewError as e:
            return self._respond(endpoint, self._bad(endpoint, data, e), 400, started)
        out, code = await self.answer(endpoint, data)
        return self._respond(endpoint, out, code, started)

    async def answer(self, endpoint: str, data: bytes) -> tuple[bytes, int]:
        """The answer to the AdmissionReview ``data`` (a whole body) at ``endpoint``, and its HTTP code."""
        known = answers.request(data) if endpoint == "mutate" and self.engine.answers.enabled else None
        if known is not None and (remembered := self._recall(known)) is not None:
            return remembered, 200
        try:
            review = codec.decode(data)
        except ReviewError as e:
            return self._bad(endpoint, data, e), 400
        self.metrics.requests.entered(endpoint)
        try:
            run = self._mutate(review, known) if endpoint == "mutate" else self._validate(review)
            return await self._deadlines.run(run, self.deadline)
        except TimeoutError:
            log.error("deadline exceeded", extra={"endpoint": endpoint, "uid": review.uid})
            return self._failed(review, f"kinitiras-py did not finish within its {self.deadline:g} s deadline")
        except Exception as e:  # an answer with this request's uid, never a dropped request
            log.exception("unexpected error", extra={"endpoint": endpoint, "uid": review.uid})
            return self._failed(review, f"kinitiras-py internal error: {e}")
        finally:
            self.metrics.requests.left(endpoint)

    @staticmethod
    def _bad(endpoint: str, data: bytes, error: ReviewError) -> bytes:
        """The 400 answer to a request that is not a review we can read."""
        api_version, uid = codec.peek_uid(data)
        log.warning("bad admission request", extra={"endpoint": endpoint, "reason": str(error)})
        return codec.denied(api_version, uid, f"bad admission request: {error}", 400)

    def _failed(self, review: codec.Review, message: str) -> tuple[bytes, int]:
        """The answer to a request the webhook could not finish, as :attr:`failure_policy` says."""
        if self.failure_policy == "Ignore":
            warning = f"{message} (failurePolicy Ignore: admitted unchanged)"
            return codec.allowed(review.api_version, review.uid, None, [warning]), 500
        return codec.denied(review.api_version, review.uid, message, 500), 500

    def _recall(self, known: answers.ReviewBody) -> bytes | None:
        """The remembered answer to the request ``known``, if the policies in force are still those
        it was made under; its policies are counted as they were when it was made."""
        started = time.perf_counter()
        answer = self.engine.answers.recall(known, self.engine.overrides.generation)
        if answer is None:
            return None
        self.metrics.observe_policies(dict.fromkeys(answer.timed, (time.perf_counter() - started)
                                                    / (len(answer.timed) or 1)), answer.patched)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("mutate", extra={"uid": known.uid, "remembered": True, "patched": len(answer.patched)})
        return answer.to(known.uid)

    async def _mutate(self, review: codec.Review, known: answers.ReviewBody | None = None) -> tuple[bytes, int]:
        req = review.request
        if req.operation == "CONNECT":
            return codec.allowed(review.api_version, review.uid), 200
        if policies.is_policy(req.object):
            admission = policies.admit_policy(req, self.engine.egress, self.deadline)
            if admission.error is not None:
                return codec.denied(review.api_version, review.uid, admission.error, 403), 403
            return codec.allowed(review.api_version, review.uid, admission.patch, admission.warnings), 200
        mutation = await self.engine.mutate(req)
        self.metrics.observe_mutation(mutation)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("mutate", extra={"uid": review.uid, "operation": req.operation, "kind": review.kind.get("kind"),
                                       "namespace": req.namespace, "object_namespace": _namespace_of(req.object),
                                       "applied": [str(rule) for rule in mutation.applied], "ops": len(mutation.patch)})
        if mutation.failure is not None:
            self._report(mutation.failure, req.dry_run)
            return codec.denied(review.api_version, review.uid, str(mutation.failure), 403, mutation.warnings), 403
        answer = codec.allowed(review.api_version, review.uid, mutation.patch_json(), mutation.warnings)
        if known is not None and mutation.stamp is not None:
            self.engine.answers.remember(known, review.uid, mutation.stamp, answer, tuple(mutation.timings),
                                     tuple(rule.policy for rule in mutation.applied))
        return answer, 200

    async def _validate(self, review: codec.Review) -> tuple[bytes, int]:
        req = review.request
        if req.operation == "CONNECT":
            return codec.allowed(review.api_version, review.uid), 200
        warnings: list[str] = []
        if policies.is_policy(req.object):
            admission = policies.admit_policy(req, self.engine.egress, self.deadline)
            if admission.error is not None:
                return codec.denied(review.api_version, review.uid, admission.error, 403), 403
            warnings += admission.warnings
            if admission.compiled is not None and self.on_policy_admitted is not None and not req.dry_run:
                try:
                    self.on_policy_admitted(admission.compiled)
                except Exception:  # the policy is still valid; the reconciler catches up later
                    log.exception("preparing the webhook rules for a new policy failed")
        verdict = await self.engine.validate(req)
        self.metrics.observe_verdict(verdict)
        if verdict.audit and not req.dry_run:
            for entry in verdict.audit:
                log.info("audit", extra={"uid": review.uid, "finding": entry})
        if verdict.failure is not None:
            self._report(verdict.failure, req.dry_run)
        if self.findings is not None and verdict.allowed:
            self.findings.offer(req.object, req.operation, req.dry_run, verdict)
        if not verdict.allowed:
            return codec.denied(review.api_version, review.uid, verdict.message, 403, warnings + verdict.warnings), 403
        return codec.allowed(review.api_version, review.uid, None, warnings + verdict.warnings, verdict.audit), 200

    def _report(self, failure: RuleFailure, dry_run: bool) -> None:
        log.warning("rule failed",
                    extra={"policy": str(failure.policy), "rule": failure.rule.rule, "reason": failure.reason})
        if self.on_rule_failure is not None and not dry_run:
            self.on_rule_failure(failure)

    async def readyz(self, _request: web.Request) -> web.Response:
        """GET /readyz: 200 once informers synced and certificates loaded."""
        if self.ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready: informers not synced or certificates not loaded")

    async def healthz(self, _request: web.Request) -> web.Response:
        """GET /healthz: the process serves requests."""
        return web.Response(text="ok")


def _namespace_of(obj: dict[str, object]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("namespace") or "") if isinstance(meta, dict) else ""
