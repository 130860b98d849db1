"""`metav1.Status` errors: one exception per reason, each knowing its HTTP code.

Raised anywhere below an API route, rendered once at the edge, so a client always gets
`kind: Status` with the right `reason` and `code`, never a traceback.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServiceUnavailable",
    "StatusError",
    "Timeout",
    "TooManyRequests",
    "Unauthorized",
    "status_body",
]


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `metav1.Status` object for a failure."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class StatusError(Exception):
    """Base of the hierarchy; `code` and `reason` are the metav1 ones."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, log_detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.log_detail = log_detail  # for the server's log only, never in the Status (a backend's text)

    def to_status(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)


class BadRequest(StatusError):
    code, reason = 400, "BadRequest"


class Unauthorized(StatusError):
    code, reason = 401, "Unauthorized"


class Forbidden(StatusError):
    code, reason = 403, "Forbidden"


class NotFound(StatusError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(StatusError):
    code, reason = 405, "MethodNotAllowed"


class AlreadyExists(StatusError):
    code, reason = 409, "AlreadyExists"


class Conflict(StatusError):
    code, reason = 409, "Conflict"


class Gone(StatusError):
    code, reason = 410, "Expired"


class Invalid(StatusError):
    code, reason = 422, "Invalid"


class TooManyRequests(StatusError):
    code, reason = 429, "TooManyRequests"


class InternalError(StatusError):
    code, reason = 500, "InternalError"


class ServiceUnavailable(StatusError):
    code, reason = 503, "ServiceUnavailable"


class Timeout(StatusError):
    code, reason = 504, "Timeout"
