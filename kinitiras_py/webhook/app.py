"""The aiohttp application: routes and the error middleware. Sockets and TLS are in server.py."""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from kinitiras_py.webhook import codec
from kinitiras_py.webhook.handlers import Handlers

log = logging.getLogger("kinitiras_py.webhook")
MAX_BODY_BYTES = 8 * 1024 * 1024
"""Objects are at most ~3 MiB in etcd; a review may carry object and oldObject."""


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The only place exceptions become responses: never a traceback, never a dropped request."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        message = f"the admission request exceeds {MAX_BODY_BYTES} bytes"
        return web.Response(status=413, text=message)
    except web.HTTPException:
        raise
    except Exception as e:  # every failure must still answer the API server
        log.exception("unexpected error", extra={"path": request.path})
        if request.path in ("/mutate", "/validate"):
            body = await request.read() if request.can_read_body else b""
            api_version, uid = codec.peek_uid(body)
            return web.Response(body=codec.denied(api_version, uid, f"kinitiras-py internal error: {e}", 500),
                                content_type="application/json")
        return web.Response(status=500, text=f"internal error: {e}")


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
