"""The one exception the client raises: `FleetmemError`, carrying the AGENT_OPERATOR envelope."""

from __future__ import annotations

from typing import Any

from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.envelope import envelope_code, http_envelope
from fleetmem.errors import Fix, VerbError

#: `FleetmemError.unanswered` when the server answered with something other than a JSON body.
NOT_JSON = "not_json"


class FleetmemError(Exception):
    """A call the server refused or could not answer, or that never reached it.

    `envelope` is the server's error body as it came (docs/protocol.md, Errors); `code`, `message`,
    `fix` (with `fix["next"]`: run, wait, tell_user_to_run, ask_user, report) and `correlation_id`
    are read from it. `status` is the HTTP status (None on MCP and the local mode). `unanswered` is
    None when the envelope is the server's; when the client built it because no usable answer came,
    it says why: the transport error's name (no answer at all) or `NOT_JSON`."""

    def __init__(self, envelope: dict[str, Any], *, status: int | None = None, unanswered: str | None = None) -> None:
        self.envelope = dict(envelope)
        self.code = envelope_code(envelope) or "error"
        self.message = str(envelope.get("message") or "")
        fix = envelope.get("fix")
        self.fix: dict[str, Any] = dict(fix) if isinstance(fix, dict) else {}
        cid = envelope.get("correlation_id")
        self.correlation_id: str | None = str(cid) if cid else None
        self.status = status
        self.unanswered = unanswered
        super().__init__(f"{self.code}: {self.message}")

    @property
    def next(self) -> str | None:
        """What to do next (`fix.next`)."""
        value = self.fix.get("next")
        return str(value) if value else None

    @property
    def retry_after_seconds(self) -> float | None:
        value = self.fix.get("retry_after_seconds")
        return float(value) if isinstance(value, int | float) else None

    @classmethod
    def built(
        cls,
        code: Any,
        message: str,
        suggestion: str,
        why: str,
        *,
        actor: Any = "agent",
        status: int | None = None,
        unanswered: str | None = None,
    ) -> FleetmemError:
        """An error the client states itself (no server answer), in the same envelope."""
        err = VerbError(code, message, suggestion, fix=Fix(why=why, actor=actor))
        return cls(http_envelope(err, correlation_id=new_correlation_id()).body(), status=status, unanswered=unanswered)

    @classmethod
    def unreachable(cls, where: str, reason: str) -> FleetmemError:
        return cls.built(
            "unavailable",
            f"Could not reach the memory endpoint {where} ({reason}).",
            "Check that the server is running and the URL is its base (locally: fleetmem serve), then retry; "
            "raise `timeout` for a slow network.",
            "The request never got an answer, so nothing can be corrected in it.",
            actor="host_admin",
            unanswered=reason,
        )
