"""Errors the domain raises and adapters translate into.

`VerbError` carries everything the AGENT_OPERATOR envelope needs; `fleetmem.contract.envelope`
is the ONE place that turns it into wire JSON. Adapters never raise SDK exceptions past their
boundary: they translate them into a `PortError` subclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetmem.protocol import Actor, ErrorClass, ErrorCode, NoticeKind


@dataclass(frozen=True)
class Fix:
    """A next step. `next` is not stored: the envelope builder computes it (AGENT_OPERATOR table)."""

    why: str
    mcp: dict[str, Any] | None = None  # {"tool": name, "arguments": {...}}
    argv: list[str] | None = None
    actor: Actor = "agent"
    consent: tuple[str, ...] = ()
    verify: dict[str, Any] | None = None  # {"mcp": {...}} or {"argv": [...]}, always read-only
    retry_after_seconds: int | None = None
    user_message: str | None = None
    asks_user: bool = False
    #: The failing call again with these arguments set (`amend`) and these left out (`drop`), every
    #: other argument kept. The envelope builder turns it into `mcp` for the call it answers, so the
    #: raiser need not know the call. Only for corrections that keep the caller's meaning.
    amend: dict[str, Any] | None = None
    drop: tuple[str, ...] = ()
    #: Values to obtain before running: [{"name", "how"}]; `argv` holds `<name>` only for these.
    inputs: tuple[dict[str, str], ...] = ()

    def __post_init__(self) -> None:
        # Sequences arrive as lists after a JSON round trip (Lambda invoke); keep one form.
        object.__setattr__(self, "consent", tuple(self.consent))
        object.__setattr__(self, "drop", tuple(self.drop))
        object.__setattr__(self, "inputs", tuple(dict(i) for i in self.inputs))


@dataclass(frozen=True)
class Notice:
    """Advice riding a successful result (degraded search, empty retrieval, unknown param, ...)."""

    code: str
    kind: NoticeKind
    why: str
    fix: Fix | None = None
    user_message: str | None = None


class VerbError(Exception):
    """A failure with a stable code, a populated suggestion and (usually) a fix."""

    #: D22: a keyed write's failure may name its write-level cause (`write_error`, spelled as the
    #: reference spells it) and carry the write's receipt (`write_request`); set after construction.
    write_error: str | None = None
    write_request: dict[str, Any] | None = None

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        suggestion: str,
        *,
        why: str | None = None,
        detail: Any = None,
        fix: Fix | None = None,
        klass: ErrorClass | None = None,
        retryable: bool = False,
        notices: list[Notice] | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion
        self.why = why
        self.detail = detail
        self.fix = fix
        self.klass = klass
        self.retryable = retryable
        self.notices = notices or []
        self.http_status = http_status


def caller_error(
    message: str,
    *,
    problem: str,
    cause: str,
    instead: str,
    field: str,
    reason: str,
    code: ErrorCode = "invalid_params",
) -> VerbError:
    """A caller's mistake that only the caller can correct (no run-fix): the suggestion reads
    "Problem: … Cause: … Fix: …" and `detail` names the field and the reason."""
    return VerbError(
        code,
        message,
        f"Problem: {problem} Cause: {cause} Fix: {instead}",
        why=cause,
        detail={"field": field, "reason": reason},
        fix=Fix(why=instead),
        klass="caller",
    )


def retry_later(
    message: str, *, wait_s: int, why: str, fix_why: str, reason: str, mcp: dict[str, Any] | None
) -> VerbError:
    """`unavailable` that the same call cures after `wait_s` seconds: the suggestion, the fix and
    `retry_after_seconds` all say the same wait."""
    return VerbError(
        "unavailable",
        message,
        f"Wait {wait_s} s, then retry the same call.",
        why=why,
        detail={"reason": reason} if reason else None,
        fix=Fix(why=fix_why, mcp=mcp, actor="provider", retry_after_seconds=wait_s),
        retryable=True,
    )


class PortError(Exception):
    """Base of the errors adapters raise. Messages must never hold secrets, SQL or vectors."""


class Unavailable(PortError):
    """A dependency cannot serve now (throttled, down, not configured)."""

    def __init__(self, message: str, *, retry_after_seconds: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds
        self.reason = reason


class Conflict(PortError):
    """A conditional write lost (the stored item changed, or already exists)."""


class NotFound(PortError):
    """The addressed item does not exist for this tenant."""


class TooLarge(PortError):
    """An item exceeds what the store can hold."""


@dataclass
class Outcome:
    """What a tool's `run` returns: the JSON body (content[0]) plus per-call notices."""

    body: dict[str, Any]
    notices: list[Notice] = field(default_factory=list)
