"""Status bodies and the error that the HTTP handler answers with one."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """Answer the request with a Status body (and `headers`, such as Retry-After)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
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


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def int_value(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"invalid {name}: {value!r}") from None


def int_param(query: dict[str, str], name: str, default: int) -> int:
    value = query.get(name, "")
    return default if value == "" else int_value(name, value)


def resource_version_param(value: str) -> int | None:
    """A resourceVersion query parameter: None for "" and "0" (any version), else its number.

    The API server parses it as an unsigned integer and answers 400 otherwise, also when a
    watch resumes from a malformed version it was once given.
    """
    if value in {"", "0"}:
        return None
    if not value.isascii() or not value.isdigit():
        raise bad_request(
            f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: '
            f'parsing "{value}": invalid syntax'
        )
    return int(value)
