"""The one builder of the AGENT_OPERATOR v1 wire contract: the error envelope (`ErrorEnvelope`),
rendered fixes (`RenderedFix`) and notices (`RenderedNotice`), as frozen models.

Every transport (MCP over HTTP, `/v1`, Lambda, the gateway's own bodies, the CLI's --json) turns a
`VerbError` into an `ErrorEnvelope` here (`build_envelope`) and dumps it once into the body
(`ErrorEnvelope.body`), so the fields never drift; `/v1`'s OpenAPI document draws the same model.
`next` is computed at render time from the fix and the transport (AGENT_OPERATOR's decision table);
it is never stored on a `Fix`.

Light: pydantic plus fleetmem.protocol/errors only (the memory console's client reads it).

Default `class` per code (the envelope's own `klass` wins when the raiser sets one):
- `invalid_params`, `provenance_required`, `not_found`, `unknown_tool`, `budget_unsatisfiable`:
  `caller` — the caller can correct its own call.
- `scope_denied`, `unauthorized`: `host_only` — only the operator of the memory host can grant a
  scope or mint a token (actor `host_admin`); the agent cannot fix it from its connection.
- `unavailable`: `unavailable` (retryable only when the fix is a `wait`).
- `rate_limited`: `retryable`.
- `internal`: `server`, with a fix that has no runnable step, so `next` is `report`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection, Iterable, Mapping
from typing import Annotated, Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from fleetmem.errors import Fix, Notice, VerbError
from fleetmem.protocol import (
    CONTRACT_VERSION,
    ERROR_CODES,
    NOTICE_KIND_ORDER,
    PROTOCOL_VERSION,
    Actor,
    ErrorClass,
    ErrorCode,
    NextStep,
    NoticeKind,
    Transport,
    WriteError,
)

CALLER_CODES = frozenset({"invalid_params", "provenance_required", "not_found", "unknown_tool", "budget_unsatisfiable"})
HOST_ONLY_CODES = frozenset({"scope_denied", "unauthorized"})

#: Where a call came from; everything except "cli" is an MCP/HTTP connection.
CLI_TRANSPORT: Transport = "cli"

NOTICE_PREFIX = "[fleetmem notice"
NOTICES_META_KEY = "fleetmem/notices"
#: D28: the reference's `_meta` key for the same notices (clients written for it find them there).
REFERENCE_NOTICES_META_KEY = "gbrain_notices"
#: D28: the key of a successful body's notices (MCP content[0] / structuredContent, `/v1`, --json).
NOTICES_KEY = "notices"

# Marker tokens that must never open or close a block from inside a value (AGENT_OPERATOR
# "Marker grammar"): data is never an instruction.
_MARKERS = ("[fleetmem notice", "[AGENT]", "[/AGENT]", "[SHOW USER]", "[/SHOW USER]")


# ---------------------------------------------------------------------------------------------
# The models. Built by the functions below (`model_construct`: the builder is trusted, and a value
# may hold text the caller sent); read back with `ErrorEnvelope.model_validate(body)`. `body()`
# dumps only the keys that were set, in field order: the wire shape.

#: How a typed field shows in the JSON schema (OpenAPI): a non-empty string, as documented.
_TEXT = WithJsonSchema({"minLength": 1, "type": "string"})
_OBJECTS = WithJsonSchema(
    {"anyOf": [{"items": {"additionalProperties": True, "type": "object"}, "type": "array"}, {"type": "null"}]}
)


class _Wire(BaseModel):
    def body(self) -> dict[str, Any]:
        """The JSON object on the wire: the keys that were set, aliases as the wire spells them."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class RenderedFix(_Wire):
    """The envelope's `fix`: the next step, rendered for the caller's transport."""

    model_config = ConfigDict(extra="allow", frozen=True)

    mcp: dict[str, Any] | None = None
    argv: list[str] | None = None
    command: str | None = None
    consent: list[str]
    actor: Annotated[Actor, _TEXT]
    next: Annotated[NextStep, _TEXT]
    why: str = Field(min_length=1)
    verify: Any = None
    retry_after_seconds: int | None = None
    user_message: str | None = None
    inputs: list[dict[str, Any]] | None = None
    requires_exclusive: bool


class RenderedNotice(_Wire):
    """A notice as `_meta["fleetmem/notices"]`, a `/v1` body's `notices` and an envelope carry it."""

    model_config = ConfigDict(frozen=True)

    code: str
    kind: NoticeKind
    why: str
    fix: RenderedFix | None = None
    user_message: str | None = None
    contract_version: int


class ErrorEnvelope(_Wire):
    """Every non-2xx body of the HTTP API (and every MCP error result): what failed (`message`),
    what to do (`suggestion`, never empty) and the runnable next step (`fix`)."""

    # The docstring is the OpenAPI component's description. The code is written under both `error`
    # and `code` (the same value); readers take `code` (`envelope_code`).
    model_config = ConfigDict(extra="forbid", frozen=True)

    error: Annotated[ErrorCode, _TEXT]
    code: Annotated[ErrorCode, _TEXT]
    message: str = Field(min_length=1)
    suggestion: str = Field(min_length=1)
    why: str | None = None
    detail: Any = None
    fix: RenderedFix
    class_: Annotated[ErrorClass, _TEXT] = Field(alias="class")
    retryable: bool
    notices: Annotated[list[RenderedNotice] | None, _OBJECTS] = None
    protocol_version: int
    contract_version: int
    correlation_id: str = Field(min_length=1)
    #: D22: the write's receipt (a pending write, or the request a conflict names) and the
    #: write-level cause (`idempotency_conflict`, `write_pending`); optional.
    write_request: dict[str, Any] | None = None
    write_error: WriteError | None = None

    def with_message(self, message: str) -> ErrorEnvelope:
        """The same envelope saying `message` (a gateway body whose text the gateway fixes)."""
        return self.model_copy(update={"message": message})


def is_error_code(value: object) -> TypeGuard[ErrorCode]:
    return isinstance(value, str) and value in ERROR_CODES


def code_of(body: Mapping[str, Any]) -> ErrorCode | None:
    """The envelope code of an error body this server built (`code`), or None when it has none."""
    value = body.get("code")
    return value if is_error_code(value) else None


def envelope_code(body: Mapping[str, Any]) -> str | None:
    """The code of an error body read from the wire, whoever answered: `code`, which every
    envelope writes (with the same value under `error`), else a bare `error` (a body from a proxy in
    front of the server). The one place a reader looks for it."""
    value = body.get("code") or body.get("error")
    return str(value) if value else None


def default_class(code: ErrorCode) -> ErrorClass:
    if code in CALLER_CODES:
        return "caller"
    if code in HOST_ONLY_CODES:
        return "host_only"
    if code == "unavailable":
        return "unavailable"
    if code == "rate_limited":
        return "retryable"
    return "server"


def _on_cli(transport: Transport) -> bool:
    return transport == CLI_TRANSPORT


def _mcp_callable(fix: Fix, callable_tools: Collection[str] | None) -> bool:
    if not fix.mcp or not fix.mcp.get("tool"):
        return False
    return callable_tools is None or fix.mcp["tool"] in callable_tools


def effective_actor(fix: Fix, transport: Transport) -> str:
    """A CLI-only fix rendered for an MCP/HTTP caller belongs to the host's operator (it runs on the
    memory host, not on the agent's connection)."""
    if fix.actor == "agent" and fix.argv and not fix.mcp and not _on_cli(transport):
        return "host_admin"
    return fix.actor


def compute_next(fix: Fix, transport: Transport, *, callable_tools: Collection[str] | None = None) -> NextStep:
    """AGENT_OPERATOR's `next` decision table; the first matching row wins.

    `callable_tools` (when known) is what this caller can call on this connection: an `mcp` step
    naming anything else is not runnable here.
    """
    if fix.asks_user:
        return "ask_user"
    if fix.actor == "provider" and fix.retry_after_seconds is not None and not fix.mcp and not fix.argv:
        return "wait"  # the same request again, later (e.g. a gateway throttle that cannot name the call)
    mcp_ok = _mcp_callable(fix, callable_tools)
    mcp_only_on_cli = bool(fix.mcp) and not fix.argv and _on_cli(transport)
    if not fix.argv and not mcp_ok and not mcp_only_on_cli:
        return "report"
    actor = effective_actor(fix, transport)
    if actor == "provider":
        return "wait"
    cli_only_on_mcp = bool(fix.argv) and not mcp_ok and not _on_cli(transport)
    if actor in ("user", "host_admin") or cli_only_on_mcp or mcp_only_on_cli:
        return "tell_user_to_run"
    if fix.consent:
        return "ask_user"
    return "run"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False, default=str)


def render_call(fix: Fix, transport: Transport = "mcp") -> str | None:
    """The fix as one line a human or agent can run: `tool {"arg":1}` or a shell command."""
    if fix.mcp and (not _on_cli(transport) or not fix.argv):
        return f"{fix.mcp.get('tool')} {_compact(fix.mcp.get('arguments') or {})}"
    if fix.argv:
        return shlex.join(fix.argv)
    return None


def _names_callable(step: Mapping[str, Any] | None, callable_tools: Collection[str]) -> bool:
    return not step or not step.get("tool") or step["tool"] in callable_tools


def callable_fix(fix: Fix, callable_tools: Collection[str] | None) -> Fix:
    """D28: the fix as this caller may see it. THE one place a step naming a tool outside the
    caller's tools/list (surface and scopes) is dropped: an `mcp` step it cannot call, a `verify`
    it cannot run. What is left (an `argv` for the operator, a wait, or nothing: `report`) decides
    `next`. `callable_tools` None: not known here, everything kept."""
    if callable_tools is None:
        return fix
    verify = fix.verify if _names_callable((fix.verify or {}).get("mcp"), callable_tools) else None
    if _names_callable(fix.mcp, callable_tools) and verify is fix.verify:
        return fix
    mcp = fix.mcp if _names_callable(fix.mcp, callable_tools) else None
    return Fix(**{**_fix_fields(fix), "mcp": mcp, "verify": verify})


def rendered_fix(fix: Fix, transport: Transport, *, callable_tools: Collection[str] | None = None) -> RenderedFix:
    """RenderedAction: {mcp?, argv?, command?, consent, actor, next, why, verify?,
    retry_after_seconds?, user_message?, inputs?, requires_exclusive}; only the keys set appear.
    A step this caller cannot call is left out (`callable_fix`)."""
    fix = callable_fix(fix, callable_tools)
    out: dict[str, Any] = {}
    if fix.mcp:
        out["mcp"] = {"tool": fix.mcp.get("tool"), "arguments": dict(fix.mcp.get("arguments") or {})}
    if fix.argv:
        out["argv"] = list(fix.argv)
        out["command"] = shlex.join(fix.argv)
    out["consent"] = list(fix.consent)
    out["actor"] = effective_actor(fix, transport)
    out["next"] = compute_next(fix, transport, callable_tools=callable_tools)
    out["why"] = fix.why
    if fix.verify:
        out["verify"] = fix.verify
    if fix.retry_after_seconds is not None:
        out["retry_after_seconds"] = int(fix.retry_after_seconds)
    if fix.user_message:
        out["user_message"] = fix.user_message
    if fix.inputs:
        out["inputs"] = [dict(i) for i in fix.inputs]
    out["requires_exclusive"] = False
    return RenderedFix.model_construct(**out)


def render_fix(fix: Fix, transport: Transport, *, callable_tools: Collection[str] | None = None) -> dict[str, Any]:
    """The rendered fix as its JSON object (`rendered_fix`, dumped)."""
    return rendered_fix(fix, transport, callable_tools=callable_tools).body()


def _suggestion(err: VerbError, fix: Fix | None, transport: Transport) -> str:
    base = (err.suggestion or "").strip()
    if not base:
        # Never empty: problem, cause, then what to do.
        parts = [err.message.strip(), (err.why or "").strip(), (fix.why if fix else "").strip()]
        base = " ".join(p for p in parts if p) or f"The call failed with {err.code}."
    call = render_call(fix, transport) if fix else None
    if call and call not in base:
        sep = "" if base.endswith((".", "!", "?")) else "."
        base = f"{base}{sep} Next: {call}"
    return base


def build_envelope(
    err: VerbError,
    *,
    tool: str,
    arguments: Mapping[str, Any] | None,
    correlation_id: str,
    transport: Transport,
    callable_tools: Collection[str] | None = None,
) -> ErrorEnvelope:
    """The one error shape (docs/protocol.md, errors; AGENT_OPERATOR "The error envelope").

    `tool`/`arguments` name the failing call; they are used only when the error's own fix does not
    carry a call: a `wait` retry repeats the same call, an `amend`/`drop` fix is the same call with
    the bad argument corrected. An error without a fix gets `no_step_fix` (`next: report`)."""
    fix = callable_fix(_runnable_fix(err, tool, arguments), callable_tools)
    rendered = rendered_fix(fix, transport, callable_tools=callable_tools)
    retryable = bool(err.retryable) or err.code == "rate_limited" or rendered.next == "wait"
    env: dict[str, Any] = {
        "error": err.code,
        "code": err.code,
        "message": err.message,
        "suggestion": _suggestion(err, fix, transport),
    }
    if err.why:
        env["why"] = err.why
    if err.detail is not None:
        env["detail"] = err.detail
    env["fix"] = rendered
    env["class_"] = err.klass or default_class(err.code)
    env["retryable"] = retryable
    if err.notices:
        env["notices"] = [
            rendered_notice(n, transport, callable_tools=callable_tools) for n in order_notices(err.notices)
        ]
    env["protocol_version"] = PROTOCOL_VERSION
    env["contract_version"] = CONTRACT_VERSION
    env["correlation_id"] = correlation_id
    if err.write_request is not None:
        env["write_request"] = err.write_request
    if err.write_error is not None:
        env["write_error"] = err.write_error
    return ErrorEnvelope.model_construct(**env)


def http_envelope(error: VerbError, *, correlation_id: str) -> ErrorEnvelope:
    """The envelope of an HTTP answer given below the tools (a refusal, a 401, a gateway body, a
    cut-off): no call to echo, rendered for the `http` transport."""
    return build_envelope(error, tool="", arguments={}, correlation_id=correlation_id, transport="http")


def _runnable_fix(err: VerbError, tool: str, arguments: Mapping[str, Any] | None) -> Fix:
    """The error's fix with the call it answers filled in where the fix implies it."""
    fix = err.fix if err.fix is not None else no_step_fix(err)
    if fix.mcp is None and (fix.amend is not None or fix.drop) and tool:
        # "The same call with this argument corrected": the call is the one this envelope answers.
        same = {k: v for k, v in (arguments or {}).items() if k not in fix.drop}
        same.update(fix.amend or {})
        fix = Fix(**{**_fix_fields(fix), "mcp": {"tool": tool, "arguments": same}})
    if fix.mcp is None and fix.actor == "provider" and not fix.argv and tool:
        # A wait fix repeats the same request; make it runnable.
        fix = Fix(**{**_fix_fields(fix), "mcp": {"tool": tool, "arguments": dict(arguments or {})}})
    return fix


def _fix_fields(fix: Fix) -> dict[str, Any]:
    return {f: getattr(fix, f) for f in fix.__dataclass_fields__}


def no_step_fix(err: VerbError) -> Fix:
    """The fix of an error that brings none: no runnable step, so `next` renders `report` (decision
    table row 2). Every envelope carries a fix, so an agent always finds `fix.next`."""
    owner: Actor = "host_admin" if default_class(err.code) == "host_only" else "agent"
    return Fix(
        why="No corrected call can be derived from this one, so there is nothing to run: tell the user "
        "what failed (the message) and follow the suggestion.",
        actor=owner,
    )


def internal_error(tool: str) -> VerbError:
    """What every unexpected exception becomes. Names the tool, never the exception's text."""
    return VerbError(
        "internal",
        f"fleetmem hit an unexpected error while running {tool}.",
        "The failure is on the server, not in your call. Tell the user the memory call failed and "
        "quote the correlation_id to the memory host's operator; retry later only if the call is safe "
        "to repeat.",
        why="The server raised an error it does not recognise; the details are in the server log "
        "under this correlation_id.",
        fix=Fix(
            why="Nothing in the call can fix this; the operator can find the cause in the server log by "
            "correlation_id.",
            actor="host_admin",
            user_message="The memory service had an internal error. The operator can look it up with "
            "the correlation id in the error.",
        ),
        klass="server",
    )


def internal_envelope(correlation_id: str, tool: str, *, transport: Transport = "mcp") -> ErrorEnvelope:
    """Envelope for an unexpected exception: no stack trace, SQL, credential or vector — nothing of
    the exception reaches it."""
    return build_envelope(
        internal_error(tool), tool=tool, arguments={}, correlation_id=correlation_id, transport=transport
    )


# ---------------------------------------------------------------------------------------------
# Notices


def order_notices(notices: Iterable[Notice]) -> list[Notice]:
    """safety, degraded, ask, coaching, info (stable within a kind)."""
    rank = {k: i for i, k in enumerate(NOTICE_KIND_ORDER)}
    return sorted(notices, key=lambda n: rank.get(n.kind, len(rank)))


def _flat(value: str) -> str:
    text = " ".join(str(value).split())
    for marker in _MARKERS:
        if marker in text:
            text = text.replace(marker, "(" + marker[1:])
    return text


def notice_fix(notice: Notice, callable_tools: Collection[str] | None) -> Fix | None:
    """D28: a notice's fix, or None when its step names a tool this caller cannot call and nothing
    else in it is runnable (a notice is advice: it goes without a fix rather than with a dead one)."""
    fix = notice.fix
    if fix is None or callable_tools is None or _names_callable(fix.mcp, callable_tools) or fix.argv:
        return fix
    return None


def rendered_notice(
    notice: Notice, transport: Transport = "mcp", *, callable_tools: Collection[str] | None = None
) -> RenderedNotice:
    """RenderedNotice for `_meta`, `/v1` bodies and error envelopes."""
    out: dict[str, Any] = {"code": notice.code, "kind": notice.kind, "why": notice.why}
    fix = notice_fix(notice, callable_tools)
    if fix is not None:
        out["fix"] = rendered_fix(fix, transport, callable_tools=callable_tools)
    if notice.user_message:
        out["user_message"] = notice.user_message
    out["contract_version"] = CONTRACT_VERSION
    return RenderedNotice.model_construct(**out)


def render_notice_meta(
    notice: Notice, transport: Transport = "mcp", *, callable_tools: Collection[str] | None = None
) -> dict[str, Any]:
    """The rendered notice as its JSON object (`rendered_notice`, dumped)."""
    return rendered_notice(notice, transport, callable_tools=callable_tools).body()


def render_notice_block(
    notice: Notice, transport: Transport = "mcp", *, callable_tools: Collection[str] | None = None
) -> str:
    """One text block: the fixed first line, then only the fields that are set, one line each."""
    lines = [f"{NOTICE_PREFIX} {_flat(notice.code)} kind={notice.kind}]", f"why: {_flat(notice.why)}"]
    fix = notice_fix(notice, callable_tools)
    if fix is not None:
        fix = callable_fix(fix, callable_tools)
        call = render_call(fix, transport)
        if call:
            lines.append(f"fix: {_flat(call)}")
        lines.append(f"next: {compute_next(fix, transport, callable_tools=callable_tools)}")
    if notice.user_message:
        lines.append(f"user_message: {_flat(notice.user_message)}")
    return "\n".join(lines)


#: The rendered notice document (the `_meta` / `--json` form); the CLI's name for it.
render_notice = render_notice_meta


def rendered_notices(
    notices: Iterable[Notice], transport: Transport = "mcp", *, callable_tools: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Notices in their order (`order_notices`), each as its JSON object: the `notices` array of a
    successful body (D28) and of `_meta`."""
    return [render_notice_meta(n, transport, callable_tools=callable_tools) for n in order_notices(notices)]


def with_notices(
    body: Mapping[str, Any],
    notices: Iterable[Notice],
    transport: Transport = "mcp",
    *,
    callable_tools: Collection[str] | None = None,
) -> dict[str, Any]:
    """D28: a successful body with its notices inside, under `notices` (absent when there are none):
    the one JSON document MCP's content[0] and structuredContent, `/v1` and the CLI's --json carry."""
    out = dict(body)
    rendered = rendered_notices(notices, transport, callable_tools=callable_tools)
    if rendered:
        out[NOTICES_KEY] = rendered
    return out
