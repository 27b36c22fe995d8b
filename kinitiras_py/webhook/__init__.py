"""HTTP transport only: bytes ↔ AdmissionReview, routes, middlewares, TLS serving, metrics.

Handlers decode, call :mod:`kinitiras_py.admission`, encode. No policy logic lives here.
"""
