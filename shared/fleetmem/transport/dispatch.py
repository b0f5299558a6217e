"""THE one dispatch: every tool call on every transport (local MCP, Lambda verb functions, CLI)
goes through `dispatch()`.

Order of checks, each answering with the one envelope builder (`fleetmem.memory.envelope`):
1. surface and scope — the same filter as tools/list (`registry.tools_for`). A tool that is not on
   this surface, or does not exist, is `unknown_tool` (fail-closed: a hidden tool is never
   acknowledged). A tool on this surface that the caller's scopes do not allow is `scope_denied`.
   Either way it is absent from this caller's tools/list, so list and call agree.
2. arguments must be a JSON object (`None` means `{}`).
3. D3 unknown parameters: reads ignore them with an `unknown_param` notice; writes refuse them with
   `invalid_params` whose fix is the same call without the key (or with the closest known name).
   `_meta` and `dry_run` are always allowed; `idempotency_key` on tools that take one.
4. pydantic validation -> `invalid_params` naming the field, with a fix when one is derivable (the
   field's default, other arguments kept).
5. D2 idempotency: claim before run, complete after, release on error.
6. run; `VerbError` -> envelope; `PortError` -> mapped envelope; anything else -> `internal`
   (logged with the correlation id and the exception TYPE only).

`dry_run: true` on a tool whose parameters do not define it checks the arguments against the schema
and returns `{dry_run: true, ran: false, ...}` without running the tool (nothing is written); a
non-boolean `dry_run` is refused rather than read as false.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import re
import time
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

import fleetmem.memory.verbs  # noqa: F401  (completes REGISTRY)
from fleetmem.errors import Conflict, Fix, NotFound, Notice, PortError, TooLarge, Unavailable, VerbError
from fleetmem.memory.envelope import build_envelope, internal_envelope
from fleetmem.memory.registry import REGISTRY, ToolSpec, tools_for
from fleetmem.models import Caller, IdempotencyRecord
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import IDEMPOTENCY_TTL_HOURS, PROTOCOL_VERSION, Surface
from fleetmem.transport.logs import correlation, new_correlation_id

log = logging.getLogger("fleetmem.transport.dispatch")

ALWAYS_ALLOWED = frozenset({"_meta", "dry_run"})
IDEMPOTENCY_KEY = "idempotency_key"
IDEMPOTENCY_KEY_MAX = 200
#: How long a caller waits before retrying while the first call with the same key is in flight.
IN_FLIGHT_RETRY_SECONDS = 1
CONFLICT_RETRY_SECONDS = 1


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


def visible_tools(surface: Surface, caller: Caller) -> list[ToolSpec]:
    """What tools/list shows this caller on this surface (and so what tools/call accepts)."""
    return tools_for(surface, caller)


def tenant_hash(tenant: str) -> str:
    return hashlib.sha256(tenant.encode()).hexdigest()[:12]


def dispatch(
    tool: str,
    arguments: dict[str, Any] | None,
    caller: Caller,
    deps: Deps,
    *,
    surface: Surface = "full",
    correlation_id: str | None = None,
    transport: str = "mcp",
) -> DispatchResult:
    cid = correlation_id or new_correlation_id()
    started = time.perf_counter()
    with correlation(cid):
        call = _Call(tool, arguments, caller, deps, surface, cid, transport)
        try:
            result = call.run()
        except Exception as exc:  # the last line of defence: never leak, always answer
            _log_internal(tool, exc)
            result = DispatchResult(internal_envelope(cid, str(tool), transport=transport), True, [], cid)
        latency_ms = int((time.perf_counter() - started) * 1000)
        log.info(
            "tool call",
            extra={
                "event": "tool_call",
                "tool": str(tool)[:64],
                "code": result.body.get("code") if result.is_error else "ok",
                "latency_ms": latency_ms,
                "client_id": caller.client_id,
                "tenant_hash": tenant_hash(caller.tenant),
                "surface": surface,
                "transport": transport,
                "replay": bool(not result.is_error and result.body.get("idempotent_replay")),
                "notices": [n.code for n in result.notices],
            },
        )
    return result


def precheck(
    tool: str,
    arguments: dict[str, Any] | None,
    caller: Caller,
    *,
    surface: Surface = "full",
    correlation_id: str,
    transport: str = "mcp",
) -> DispatchResult | None:
    """The surface/scope gate alone, for an edge that forwards calls elsewhere (no deps needed):
    the `unknown_tool` / `scope_denied` result, or None when the call may proceed."""
    with correlation(correlation_id):
        call = _Call(tool, arguments, caller, None, surface, correlation_id, transport)  # type: ignore[arg-type]
        if isinstance(arguments, dict):
            call.args = {k: v for k, v in arguments.items() if k != "_meta"}
        resolved = call._resolve()
    return resolved if isinstance(resolved, DispatchResult) else None


def _log_internal(tool: str, exc: BaseException) -> None:
    # Frames (file, line, function) help the operator; the exception's message and locals may hold
    # SQL, argument values or credentials, so they are never logged.
    frames = [
        f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}"
        for f in traceback.extract_tb(exc.__traceback__)
    ]
    log.error(
        "unexpected error",
        extra={
            "event": "internal_error",
            "tool": str(tool)[:64],
            "exc_type": type(exc).__name__,
            "frames": frames[-8:],
        },
    )


class _Call:
    def __init__(
        self,
        tool: str,
        arguments: Any,
        caller: Caller,
        deps: Deps,
        surface: Surface,
        cid: str,
        transport: str,
    ) -> None:
        self.tool = tool
        self.raw_arguments = arguments
        self.caller = caller
        self.deps = deps
        self.surface = surface
        self.cid = cid
        self.transport = transport
        self.allowed = {s.name: s for s in visible_tools(surface, caller)}
        # The arguments as the caller sent them, minus `_meta`: what fixes echo back.
        self.args: dict[str, Any] = {}

    # -- helpers -------------------------------------------------------------------------------

    def _error(self, err: VerbError) -> DispatchResult:
        body = build_envelope(
            err,
            tool=str(self.tool),
            arguments=self.args,
            correlation_id=self.cid,
            transport=self.transport,
            callable_tools=set(self.allowed),
        )
        return DispatchResult(body, True, [], self.cid)

    def _same_call(self, arguments: dict[str, Any], tool: str | None = None) -> dict[str, Any]:
        return {"tool": tool or self.tool, "arguments": arguments}

    # -- the pipeline --------------------------------------------------------------------------

    def run(self) -> DispatchResult:
        bad_text: str | None = None
        if isinstance(self.raw_arguments, dict):
            raw = {k: v for k, v in self.raw_arguments.items() if k != "_meta"}
            bad_text = _unencodable_path(raw)
            # What fixes echo back must itself be valid UTF-8.
            self.args = _scrub(raw) if bad_text is not None else raw
        spec = self._resolve()
        if isinstance(spec, DispatchResult):
            return spec
        if self.raw_arguments is not None and not isinstance(self.raw_arguments, dict):
            return self._error(
                VerbError(
                    "invalid_params",
                    f"The arguments of {spec.name} must be a JSON object.",
                    f"Send the arguments as an object of named parameters, e.g. {spec.name} {{...}}; "
                    f"tools/list shows {spec.name}'s inputSchema.",
                    why="Tool arguments are named; a list, string or number cannot be matched to parameters.",
                )
            )
        if bad_text is not None:
            return self._error(self._unencodable(spec, bad_text))
        fields = _field_names(spec.params)
        known = set(fields) | ALWAYS_ALLOWED | ({IDEMPOTENCY_KEY} if spec.idempotency else set())
        unknown = [k for k in self.args if k not in known]
        notices: list[Notice] = []
        if unknown:
            if spec.writes:
                return self._error(self._unknown_on_write(spec, unknown, fields))
            notices.extend(self._unknown_on_read(spec, unknown, fields))

        validate_args = {k: v for k, v in self.args.items() if k not in unknown}
        key: str | None = None
        if spec.idempotency and IDEMPOTENCY_KEY in validate_args:
            raw_key = (
                validate_args[IDEMPOTENCY_KEY]
                if IDEMPOTENCY_KEY in fields
                else validate_args.pop(IDEMPOTENCY_KEY)
            )
            if raw_key is not None:
                if not isinstance(raw_key, str) or not raw_key.strip() or len(raw_key) > IDEMPOTENCY_KEY_MAX:
                    return self._error(self._bad_key(spec))
                key = raw_key
        dry_run = False
        if "dry_run" in validate_args and "dry_run" not in fields:
            flag = validate_args.pop("dry_run")
            if flag is not None and not isinstance(flag, bool):
                # Never guess "false" for an unclear flag: that would run a write the caller may
                # have meant only to check. The safe reading is offered as the fix.
                return self._error(self._bad_dry_run(spec))
            dry_run = flag is True

        try:
            params = spec.params.model_validate(validate_args)
        except ValidationError as exc:
            return self._error(self._invalid(spec, exc))

        if dry_run:
            body = {
                "dry_run": True,
                "tool": spec.name,
                # The arguments passed the schema; the tool's own rules run only on a real call.
                "ran": False,
                "arguments": params.model_dump(mode="json"),
                "protocol_version": PROTOCOL_VERSION,
            }
            return DispatchResult(body, False, notices, self.cid)

        if key is None:
            return self._execute(spec, params, notices)
        return self._execute_idempotent(spec, params, key, notices)

    def _resolve(self) -> ToolSpec | DispatchResult:
        name = self.tool if isinstance(self.tool, str) else ""
        spec = REGISTRY.get(name)
        on_surface = spec is not None and (self.surface == "full" or spec.surface == "verbs")
        if not on_surface:
            return self._error(self._unknown_tool(name, spec))
        assert spec is not None
        if spec.name not in self.allowed:
            return self._error(self._scope_denied(spec))
        return spec

    def _execute(self, spec: ToolSpec, params: BaseModel, notices: list[Notice]) -> DispatchResult:
        deadline = time.monotonic() + self.deps.deadline_ms / 1000.0 if self.deps.deadline_ms else None
        ctx = CallContext(self.cid, deadline_at=deadline, transport=self.transport)
        try:
            outcome = spec.run(self.deps, self.caller, params, ctx)
        except VerbError as err:
            return self._error(err)
        except PortError as exc:
            return self._error(self._port_error(spec, exc))
        return DispatchResult(dict(outcome.body), False, notices + list(outcome.notices), self.cid)

    def _execute_idempotent(
        self, spec: ToolSpec, params: BaseModel, key: str, notices: list[Notice]
    ) -> DispatchResult:
        now = self.deps.clock.now()
        request_hash = _request_hash(params)
        record = IdempotencyRecord(
            tenant=self.caller.tenant,
            client_id=self.caller.client_id,
            verb=spec.name,
            key=key,
            request_hash=request_hash,
            result=None,
            created_at=now,
            expires_at=now + timedelta(hours=IDEMPOTENCY_TTL_HOURS),
        )
        try:
            existing = self.deps.idempotency.claim(record, now=now)
        except PortError as exc:
            return self._error(self._port_error(spec, exc))
        if existing is not None:
            if existing.request_hash != request_hash:
                return self._error(self._key_conflict(spec))
            if existing.result is None:
                return self._error(self._in_flight(spec))
            body = dict(existing.result)
            body["idempotent_replay"] = True
            return DispatchResult(body, False, notices, self.cid)
        try:
            result = self._execute(spec, params, notices)
        except BaseException:
            self._release(spec, key)
            raise
        if result.is_error:
            self._release(spec, key)
            return result
        try:
            self.deps.idempotency.complete(
                self.caller.tenant, self.caller.client_id, spec.name, key, result.body
            )
        except PortError:
            # The write itself succeeded; a lost receipt only means a retry runs the (deduplicating)
            # verb again, so the caller still gets its result.
            log.warning(
                "idempotency receipt not stored",
                extra={"event": "idempotency_complete_failed", "tool": spec.name},
            )
        return result

    def _release(self, spec: ToolSpec, key: str) -> None:
        try:
            self.deps.idempotency.release(self.caller.tenant, self.caller.client_id, spec.name, key)
        except PortError:
            log.warning(
                "idempotency claim not released",
                extra={"event": "idempotency_release_failed", "tool": spec.name},
            )

    # -- error builders ------------------------------------------------------------------------

    def _unknown_tool(self, name: str, spec: ToolSpec | None) -> VerbError:
        names = sorted(self.allowed)
        listed = ", ".join(names) if names else "(none for this credential)"
        if spec is not None:
            # Exists, but not on this server's surface: only the host's operator can widen it.
            return VerbError(
                "unknown_tool",
                f"No tool named {name!r} on this server's surface.",
                f"This server exposes the '{self.surface}' surface; call one of: {listed}.",
                why="The memory host serves a reduced tool surface; hidden tools cannot be called.",
                fix=Fix(
                    why="Serving the full surface (page and admin tools) is the memory host's choice.",
                    argv=["fleetmem", "serve", "--surface", "full"],
                    actor="host_admin",
                    user_message=f"The memory server does not offer {name} on its current surface; its "
                    "operator can restart it with --surface full.",
                ),
            )
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        fix = None
        if close:
            fix = Fix(
                why=f"{close[0]} is the closest tool name this server offers.",
                mcp=self._same_call(dict(self.args), close[0]),
            )
        return VerbError(
            "unknown_tool",
            f"No tool named {name[:64]!r}.",
            f"Call one of: {listed}." + (f" Did you mean {close[0]}?" if close else ""),
            why="Tool names come from tools/list; this name is not among them.",
            fix=fix,
        )

    def _scope_denied(self, spec: ToolSpec) -> VerbError:
        scopes = sorted({"read", "write"} if spec.scope == "write" else {spec.scope})
        return VerbError(
            "scope_denied",
            f"This credential may not call {spec.name} (needs the '{spec.scope}' scope).",
            f"{spec.name} needs a token with the '{spec.scope}' scope; this client's token has "
            f"{', '.join(sorted(self.caller.scopes)) or 'no scopes'}. Ask the memory host's operator "
            f"for a token with '{spec.scope}'.",
            why="Scopes are granted per client token; tools/list shows only what this token may call.",
            detail={"needed_scope": spec.scope, "granted_scopes": sorted(self.caller.scopes)},
            fix=Fix(
                why="Only the memory host's operator can mint a token with more scopes.",
                argv=[
                    "fleetmem",
                    "token",
                    "create",
                    "--client",
                    self.caller.client_id,
                    "--scopes",
                    ",".join(scopes),
                ],
                actor="host_admin",
                user_message=f"My memory token cannot use {spec.name}; it needs the '{spec.scope}' scope. "
                "The memory server's operator can create a token that has it.",
            ),
        )

    def _unknown_on_write(self, spec: ToolSpec, unknown: list[str], fields: list[str]) -> VerbError:
        fixed = dict(self.args)
        renames: list[str] = []
        for key in unknown:
            value = fixed.pop(key)
            close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
            if close and close[0] not in fixed:
                fixed[close[0]] = value
                renames.append(f"{key} -> {close[0]}")
        names = ", ".join(f"`{k}`" for k in unknown)
        how = ("renamed " + ", ".join(renames)) if renames else "without the unknown parameter(s)"
        return VerbError(
            "invalid_params",
            f"{spec.name} does not take {names}.",
            f"{spec.name} writes, so it refuses parameters it does not know rather than guess. "
            f"Known parameters: {', '.join(fields)}. Send the same call {how}.",
            why="An unknown parameter on a write usually means a typo that would silently change what "
            "is stored; nothing was written.",
            detail={"unknown_params": unknown},
            fix=Fix(why=f"The same call {how}; nothing was written.", mcp=self._same_call(fixed)),
        )

    def _unknown_on_read(self, spec: ToolSpec, unknown: list[str], fields: list[str]) -> list[Notice]:
        out = []
        for key in unknown:
            close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
            fix = None
            if close and close[0] not in self.args:
                fixed = {k: v for k, v in self.args.items() if k not in unknown}
                fixed[close[0]] = self.args[key]
                fix = Fix(
                    why=f"`{close[0]}` is the closest parameter {spec.name} knows.",
                    mcp=self._same_call(fixed),
                )
            out.append(
                Notice(
                    code="unknown_param",
                    kind="info",
                    why=f"{spec.name} ignored the unknown parameter `{key[:64]}`"
                    + (f" (did you mean `{close[0]}`?)" if close else "")
                    + f". Known parameters: {', '.join(fields)}.",
                    fix=fix,
                )
            )
        return out

    def _invalid(self, spec: ToolSpec, exc: ValidationError) -> VerbError:
        model_fields = spec.params.model_fields
        by_alias = {f.alias: n for n, f in model_fields.items() if f.alias}
        fixed = dict({k: v for k, v in self.args.items() if k in self._validated_keys(spec)})
        derivable = True
        bad: list[str] = []
        errors = []
        for e in exc.errors(include_url=False, include_input=False):
            loc = e.get("loc") or ()
            top = loc[0] if loc and isinstance(loc[0], str) else None
            errors.append(
                {
                    "field": ".".join(str(p) for p in loc) or None,
                    "type": e.get("type"),
                    "message": e.get("msg"),
                }
            )
            if top is None:
                derivable = False
                continue
            if top not in bad:
                bad.append(top)
            name = by_alias.get(top, top)
            finfo = model_fields.get(name)
            if finfo is None or finfo.is_required():
                derivable = False
                continue
            given = self.args.get(top)
            if (
                e.get("type") == "string_type" and len(loc) == 1
                and isinstance(given, int | float) and not isinstance(given, bool)
            ):
                # A number where text belongs: the same value as text is the evident correction.
                fixed[top] = str(given)
                continue
            default = finfo.get_default(call_default_factory=True)
            if default == "":
                # An empty default only stands in for "not given"; sending it would fail again.
                derivable = False
            elif default is None:
                fixed.pop(top, None)
            else:
                fixed[top] = to_jsonable_python(default)
        first = errors[0] if errors else {"field": None, "message": "invalid"}
        field_name = bad[0] if bad else None
        described = ""
        if field_name:
            finfo = model_fields.get(by_alias.get(field_name, field_name))
            if finfo is not None and finfo.description:
                described = f" ({finfo.description.strip().rstrip('.')})"
        if field_name:
            message = f'Parameter "{field_name}" is invalid: {first["message"]}.'
        else:
            message = f"The arguments of {spec.name} are invalid: {first['message']}."
        others = [b for b in bad[1:]]
        suggestion = (
            (f"Correct `{field_name}`{described}" if field_name else f"Correct the arguments of {spec.name}")
            + (f" and also {', '.join(f'`{o}`' for o in others)}" if others else "")
            + (f"; tools/list shows {spec.name}'s inputSchema.")
        )
        fix = None
        if derivable and bad:
            keep = "your other arguments kept and " + ", ".join(
                f"`{b}` {'set to ' + _compact(fixed[b]) if b in fixed else 'left out (its default applies)'}"
                for b in bad
            )
            fix = Fix(
                why=f"The call failed validation before it ran, so nothing changed. This is the same "
                f"call with {keep}.",
                mcp=self._same_call(fixed),
            )
        return VerbError(
            "invalid_params",
            message,
            suggestion,
            why="The call failed validation before it ran, so nothing changed.",
            detail={"errors": errors},
            fix=fix,
        )

    def _validated_keys(self, spec: ToolSpec) -> set[str]:
        fields = _field_names(spec.params)
        return set(fields) | ALWAYS_ALLOWED | ({IDEMPOTENCY_KEY} if spec.idempotency else set())

    def _unencodable(self, spec: ToolSpec, path: str) -> VerbError:
        return VerbError(
            "invalid_params",
            f'Parameter "{path}" holds text that is not valid Unicode (an unpaired surrogate).',
            "Send text as valid UTF-8; the fix replaces each unpaired surrogate with U+FFFD.",
            why="Unpaired UTF-16 surrogates cannot be stored or returned as UTF-8; nothing was written.",
            detail={"field": path},
            fix=Fix(
                why="The same call with the invalid characters replaced; nothing changed.",
                mcp=self._same_call(_scrub(self.args)),
            ),
        )

    def _bad_dry_run(self, spec: ToolSpec) -> VerbError:
        return VerbError(
            "invalid_params",
            'Parameter "dry_run" must be true or false.',
            f"Pass dry_run as a JSON boolean: true checks the {spec.name} call without running it, "
            "false (or leaving it out) runs it.",
            why="An unclear dry_run is not guessed; nothing ran.",
            fix=Fix(
                why="The same call as a dry run: it validates the arguments and changes nothing.",
                mcp=self._same_call({**self.args, "dry_run": True}),
            ),
        )

    def _bad_key(self, spec: ToolSpec) -> VerbError:
        fixed = {k: v for k, v in self.args.items() if k != IDEMPOTENCY_KEY}
        return VerbError(
            "invalid_params",
            f'Parameter "{IDEMPOTENCY_KEY}" must be a non-empty string of at most '
            f"{IDEMPOTENCY_KEY_MAX} characters.",
            f"Pass a unique string per logical write (a UUID works) as `{IDEMPOTENCY_KEY}`, or leave it out.",
            why="The key identifies one logical write across retries.",
            fix=Fix(
                why="The same call without the idempotency key; nothing changed.", mcp=self._same_call(fixed)
            ),
        )

    def _key_conflict(self, spec: ToolSpec) -> VerbError:
        fixed = {k: v for k, v in self.args.items() if k != IDEMPOTENCY_KEY}
        return VerbError(
            "invalid_params",
            f"This {IDEMPOTENCY_KEY} was already used for a different {spec.name} call.",
            f"Reuse an {IDEMPOTENCY_KEY} only to retry the SAME call; for a new write use a new key or "
            "leave it out.",
            why=f"Keys are scoped to this client and tool for {IDEMPOTENCY_TTL_HOURS} h; the first call with "
            "this key had different arguments, so replaying its result would be wrong. Nothing was written.",
            detail={"reason": "idempotency_key_reused"},
            fix=Fix(
                why="The same call without the reused key; nothing was written.", mcp=self._same_call(fixed)
            ),
        )

    def _in_flight(self, spec: ToolSpec) -> VerbError:
        return VerbError(
            "unavailable",
            f"The first {spec.name} call with this {IDEMPOTENCY_KEY} is still running.",
            f"Retry the same call after {IN_FLIGHT_RETRY_SECONDS} s; it will return the first call's result.",
            why="A retry arrived before the original call finished.",
            detail={"reason": "idempotency_in_flight"},
            fix=Fix(
                why="Retrying with the same key returns the first call's result once it is stored.",
                mcp=self._same_call(dict(self.args)),
                actor="provider",
                retry_after_seconds=IN_FLIGHT_RETRY_SECONDS,
            ),
            retryable=True,
        )

    def _port_error(self, spec: ToolSpec, exc: PortError) -> VerbError:
        same = self._same_call(dict(self.args))
        if isinstance(exc, Unavailable):
            detail = {"reason": exc.reason} if exc.reason else None
            if exc.retry_after_seconds is not None:
                return VerbError(
                    "unavailable",
                    f"A service {spec.name} depends on is busy or briefly unavailable.",
                    f"Wait {exc.retry_after_seconds} s, then retry the same call.",
                    why="The storage or model provider throttled or refused the request; it recovers on "
                    "its own.",
                    detail=detail,
                    fix=Fix(
                        why="The same call after the provider's stated delay.",
                        mcp=same,
                        actor="provider",
                        retry_after_seconds=int(exc.retry_after_seconds),
                    ),
                    retryable=True,
                )
            return VerbError(
                "unavailable",
                f"A service {spec.name} depends on is not available.",
                "Tell the user the memory service cannot serve this call right now; its operator can "
                "check the configuration with the command below.",
                why="A storage or model dependency is down or not configured; retrying will not help until "
                "the operator fixes it.",
                detail=detail,
                fix=Fix(
                    why="Shows what is configured and what is degraded, each with a fix.",
                    argv=["fleetmem", "doctor", "--json"],
                    actor="host_admin",
                    user_message="The memory service cannot reach one of its dependencies; its operator "
                    "can run `fleetmem doctor` to see why.",
                ),
            )
        if isinstance(exc, Conflict):
            return VerbError(
                "unavailable",
                f"{spec.name} lost a race with a concurrent write.",
                f"Retry the same call after {CONFLICT_RETRY_SECONDS} s.",
                why="Another call changed the same item between read and write; nothing was half-written.",
                detail={"reason": "conflict"},
                fix=Fix(
                    why="A retry reads the new state and applies the call to it.",
                    mcp=same,
                    actor="provider",
                    retry_after_seconds=CONFLICT_RETRY_SECONDS,
                ),
                retryable=True,
            )
        if isinstance(exc, NotFound):
            return VerbError(
                "not_found",
                f"{spec.name} found nothing with that id for this caller.",
                "Check the id: use an id returned by remember or recall (fact_id) or a slug from list_pages.",
                why="The item does not exist, was removed, or is not visible to this credential.",
            )
        if isinstance(exc, TooLarge):
            return VerbError(
                "invalid_params",
                f"The item {spec.name} would store is too large.",
                "Split the content into smaller pieces and store them separately.",
                why="The store caps the size of one item; nothing was written.",
            )
        raise exc


_SURROGATES = re.compile("[\ud800-\udfff]")


def _unencodable_path(value: Any, path: str = "") -> str | None:
    """Dotted path of the first string (or key) holding an unpaired surrogate, else None."""
    if isinstance(value, str):
        return (path or "arguments") if _SURROGATES.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _SURROGATES.search(k):
                return _SURROGATES.sub("\ufffd", sub)
            found = _unencodable_path(v, sub)
            if found is not None:
                return _SURROGATES.sub("\ufffd", found)
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _unencodable_path(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _field_names(model: type[BaseModel]) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


def _request_hash(params: BaseModel) -> str:
    data = params.model_dump(mode="json", exclude={IDEMPOTENCY_KEY} & set(type(params).model_fields))
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
