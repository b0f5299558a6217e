"""`DispatchResult`: what one tool call answers, on every transport, and its JSON form for crossing
a process boundary (the Lambda invoke of a verb function and back).

`error_result` and `internal_result` are the failed answers an edge builds without running the
tool (a refused invoke, a throttled or broken function), from the one envelope builder
(`fleetmem.contract.envelope`); `DispatchResult.failed` is every failed answer."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fleetmem.contract.envelope import ErrorEnvelope, build_envelope, code_of, internal_envelope
from fleetmem.errors import Fix, Notice, VerbError
from fleetmem.protocol import ErrorCode, Transport


@dataclass
class DispatchResult:
    body: dict[str, Any]
    is_error: bool
    notices: list[Notice] = field(default_factory=list)
    correlation_id: str = ""
    _envelope: ErrorEnvelope | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def failed(cls, envelope: ErrorEnvelope) -> DispatchResult:
        """The failed answer: the envelope, dumped once into the body."""
        result = cls(envelope.body(), True, [], envelope.correlation_id)
        result._envelope = envelope
        return result

    @property
    def code(self) -> ErrorCode | None:
        """The envelope's code of a failed answer; None on success."""
        return code_of(self.body) if self.is_error else None

    @property
    def envelope(self) -> ErrorEnvelope | None:
        """The envelope of a failed answer (read back from the body when it crossed a process
        boundary); None on success."""
        if self.is_error and self._envelope is None:
            self._envelope = ErrorEnvelope.model_validate(self.body)
        return self._envelope if self.is_error else None

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
    transport: Transport,
    arguments: Mapping[str, Any] | None = None,
    callable_tools: Collection[str] | None = None,
) -> DispatchResult:
    """The failed answer `err` as the one envelope (`arguments`: what its fix may echo;
    `callable_tools`: what this caller can call here, when known)."""
    return DispatchResult.failed(
        build_envelope(
            err,
            tool=tool,
            arguments={} if arguments is None else arguments,
            correlation_id=correlation_id,
            transport=transport,
            callable_tools=callable_tools,
        )
    )


def internal_result(correlation_id: str, tool: str, *, transport: Transport = "mcp") -> DispatchResult:
    """The `internal` answer: something failed that the caller cannot fix; never says what."""
    return DispatchResult.failed(internal_envelope(correlation_id, tool, transport=transport))
