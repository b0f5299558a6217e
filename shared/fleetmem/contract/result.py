"""`DispatchResult`: what one tool call answers, on every transport, and its JSON form for crossing
a process boundary (the Lambda invoke of a verb function and back).

`error_result` and `internal_result` are the failed answers an edge builds without running the
tool (a refused invoke, a throttled or broken function), from the one envelope builder
(`fleetmem.memory.envelope`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fleetmem.errors import Fix, Notice, VerbError
from fleetmem.memory.envelope import build_envelope, internal_envelope


@dataclass
class DispatchResult:
    body: dict[str, Any]
    is_error: bool
    notices: list[Notice] = field(default_factory=list)
    correlation_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for crossing a process boundary (Lambda invoke); `from_json` reverses it."""
        return {
            "body": self.body,
            "is_error": self.is_error,
            "notices": [asdict(n) for n in self.notices],
            "correlation_id": self.correlation_id,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DispatchResult:
        notices = []
        for raw in data.get("notices") or []:
            raw = dict(raw)
            fix = raw.get("fix")
            if isinstance(fix, dict):
                fix = dict(fix)
                fix["consent"] = tuple(fix.get("consent") or ())
                raw["fix"] = Fix(**fix)
            notices.append(Notice(**raw))
        return cls(
            body=dict(data["body"]),
            is_error=bool(data["is_error"]),
            notices=notices,
            correlation_id=str(data.get("correlation_id") or ""),
        )


def error_result(
    err: VerbError,
    *,
    tool: str,
    correlation_id: str,
    transport: str,
    arguments: dict[str, Any] | None = None,
) -> DispatchResult:
    """The failed answer `err` as the one envelope (`arguments`: what its fix may echo)."""
    body = build_envelope(
        err,
        tool=tool,
        arguments={} if arguments is None else arguments,
        correlation_id=correlation_id,
        transport=transport,
    )
    return DispatchResult(body, True, [], correlation_id)


def internal_result(correlation_id: str, tool: str, *, transport: str = "mcp") -> DispatchResult:
    """The `internal` answer: something failed that the caller cannot fix; never says what."""
    return DispatchResult(internal_envelope(correlation_id, tool, transport=transport), True, [], correlation_id)
