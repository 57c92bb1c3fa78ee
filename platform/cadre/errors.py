"""Domain errors raised by services; the API and the console turn them into responses."""

from __future__ import annotations


class CadreError(Exception):
    """A client-side problem with a stable code, an HTTP status and optional field details."""

    code = "error"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, details: dict | None = None):
        message = str(message)  # a lazy message is read in the language active when raised
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details or {}


class InvalidInput(CadreError):
    code = "invalid"
    status = 400


class NotPermitted(CadreError):
    code = "permission_denied"
    status = 403


class NotFound(CadreError):
    code = "not_found"
    status = 404


class Conflict(CadreError):
    code = "conflict"
    status = 409
