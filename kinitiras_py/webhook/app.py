"""The aiohttp application: routes and the error middleware. Sockets and TLS are in server.py."""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from kinitiras_py.webhook import codec
from kinitiras_py.webhook.body import BODY_KEY, MAX_BODY_BYTES
from kinitiras_py.webhook.handlers import Handlers

log = logging.getLogger("kinitiras_py.webhook")
ADMISSION_PATHS = ("/mutate", "/validate")


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The last place exceptions become responses: never a traceback, never a dropped request.

    On the admission paths every answer is an AdmissionReview, with the request's uid when the
    handler got as far as reading the body (it keeps it on the request: a body cannot be read twice).
    """
    try:
        return await handler(request)
    except web.HTTPException as e:
        if request.path not in ADMISSION_PATHS or e.status < 400:
            raise
        return _denial(request, e.reason, e.status)
    except Exception as e:  # every failure must still answer the API server
        log.exception("unexpected error", extra={"path": request.path})
        if request.path in ADMISSION_PATHS:
            return _denial(request, f"kinitiras-py internal error: {e}", 500)
        return web.Response(status=500, text=f"internal error: {e}")


def _denial(request: web.Request, message: str, code: int) -> web.Response:
    api_version, uid = codec.peek_uid(request.get(BODY_KEY, b""))
    return web.Response(body=codec.denied(api_version, uid, message, code), content_type="application/json")


def make_app(handlers: Handlers, metrics_route: bool = True) -> web.Application:
    """Routes /mutate, /validate, /readyz, /healthz and, unless served apart, /metrics."""
    app = web.Application(middlewares=[errors_middleware], client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/mutate", handlers.mutate)
    app.router.add_post("/validate", handlers.validate)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/healthz", handlers.healthz)
    if metrics_route:
        app.router.add_get("/metrics", metrics_handler(handlers))
    return app


def metrics_handler(handlers: Handlers) -> Handler:
    """GET /metrics in the Prometheus text format."""
    from kinitiras_py.webhook.metrics import CONTENT_TYPE

    async def handle(_request: web.Request) -> web.Response:
        response = web.Response(body=handlers.metrics.render())
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    return handle


def make_metrics_app(handlers: Handlers) -> web.Application:
    """A plain-HTTP app serving only /metrics (for a separate metrics port)."""
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler(handlers))
    return app
