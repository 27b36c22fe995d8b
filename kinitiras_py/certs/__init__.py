"""Serving certificates: a pure authority (keys and certificates as bytes), storage and rotation."""
