"""Error code -> HTTP status, and the headers every `/v1` answer carries, for every deployment of
`/v1` (MCP itself always answers 200 and carries the envelope in the tool result). The README's
table is this one."""

from __future__ import annotations

from fleetmem.contract.envelope import ErrorEnvelope, is_error_code
from fleetmem.protocol import ErrorCode

CORRELATION_HEADER = "X-Correlation-Id"

#: HTTP status per envelope code.
HTTP_STATUS: dict[ErrorCode, int] = {
    "invalid_params": 400,
    "provenance_required": 400,
    "budget_unsatisfiable": 400,
    "unauthorized": 401,
    "scope_denied": 403,
    "not_found": 404,
    "unknown_tool": 404,
    "rate_limited": 429,
    "internal": 500,
    "unavailable": 503,
}
#: Codes whose answer carries `Retry-After` (seconds): the fix's `retry_after_seconds`, else this.
RETRY_AFTER_DEFAULT_S: dict[ErrorCode, int] = {"rate_limited": 60, "unavailable": 5}


def status_for(code: str | None) -> int:
    """The HTTP status of an error envelope's `code` (an unmapped code is a server fault: 500)."""
    return HTTP_STATUS.get(code, 500) if is_error_code(code) else 500


def error_headers(envelope: ErrorEnvelope) -> dict[str, str]:
    """`X-Correlation-Id` always, `Retry-After` for the codes that are worth retrying."""
    headers = {CORRELATION_HEADER: envelope.correlation_id}
    default = RETRY_AFTER_DEFAULT_S.get(envelope.code)
    if default is not None:
        seconds = envelope.fix.retry_after_seconds
        headers["Retry-After"] = str(seconds if isinstance(seconds, int) else default)
    return headers
