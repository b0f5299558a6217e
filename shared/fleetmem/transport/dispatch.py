"""THE one dispatch: every tool call on every transport (local MCP, Lambda verb functions, CLI)
goes through `dispatch()`.

Order of checks, each answering with the one envelope builder (`fleetmem.contract.envelope`):
1. surface and scope — the same filter as tools/list (`registry.tools_for`). A tool that is not on
   this surface, or does not exist, is `unknown_tool` (fail-closed: a hidden tool is never
   acknowledged). A tool on this surface that the caller's scopes do not allow is `scope_denied`.
   Either way it is absent from this caller's tools/list, so list and call agree.
2. arguments must be a JSON object (`None` means `{}`).
3. D3 unknown parameters: reads ignore them with ONE `unknown_param` notice (the first names and the
   count, however many were sent); writes refuse them with `invalid_params` whose fix is the same
   call without them (or with the closest known names). Later fixes echo the call without them.
   `_meta` and `dry_run` are always allowed; `idempotency_key` on tools that take one.
4. typed parameters (`fleetmem.memory.params.Params`, strict: D18) -> the tool's `invalid_params`
   naming the first bad field, with the fix its hint (or default) gives and the other arguments kept.
5. D2 idempotency (`fleetmem.transport.idempotency`): claim before run (a claim with a lease: once
   it lapses, a retry takes the key over), complete after, release on error.
6. run; `VerbError` -> envelope; `PortError` -> mapped envelope; anything else -> `internal`
   (logged with the correlation id and the exception TYPE only).

`dry_run: true` on a tool whose parameters do not define it checks the arguments against the schema
and returns `{dry_run: true, ran: false, ...}` without running the tool (nothing is written); a
non-boolean `dry_run` is refused rather than read as false.

Every answer but success is a `VerbError` built in `fleetmem.transport.errors`; the contract these
steps enforce is docs/protocol.md ("Parameters and validation", "Errors").
"""

from __future__ import annotations

import hashlib
import logging
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from fleetmem.contract.correlation import correlation, new_correlation_id
from fleetmem.contract.result import DispatchResult, error_result, internal_result
from fleetmem.contract.tools import IDEMPOTENCY_KEY
from fleetmem.errors import Notice, PortError, VerbError
from fleetmem.memory.params import invalid_from_validation
from fleetmem.memory.registry import ToolSpec, on_surface, tools_for
from fleetmem.memory.verbs import REGISTRY
from fleetmem.models import Caller
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, REQUEST_ID, Surface, Transport
from fleetmem.transport import batch, errors
from fleetmem.transport.errors import CallView
from fleetmem.transport.idempotency import RequestId, run_keyed_write, take_request_id

log = logging.getLogger("fleetmem.transport.dispatch")

ALWAYS_ALLOWED = frozenset({"_meta", "dry_run"})


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
    transport: Transport = "mcp",
) -> DispatchResult:
    cid = correlation_id or new_correlation_id()
    started = time.perf_counter()
    with correlation(cid):
        call = _Call(tool, arguments, caller, deps, surface, cid, transport)
        result = guarded(call.pipeline, tool, cid, transport=transport)
        latency_ms = int((time.perf_counter() - started) * 1000)
        log.info(
            "tool call",
            extra={
                "event": "tool_call",
                "tool": str(tool)[:64],
                "code": result.code if result.is_error else "ok",
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
    transport: Transport = "mcp",
    token_command: Sequence[str] = (),
    token_inputs: Sequence[Mapping[str, str]] = (),
) -> DispatchResult | None:
    """The surface/scope gate alone, for an edge that forwards calls elsewhere (no deps needed):
    the `unknown_tool` / `scope_denied` result, or None when the call may proceed. `token_command`
    is the server's own `token create` (its 401 fix), which a scope_denied fix reuses."""
    with correlation(correlation_id):
        call = _Call(tool, arguments, caller, None, surface, correlation_id, transport)
        call.token_command, call.token_inputs = tuple(token_command), tuple(dict(i) for i in token_inputs)
        if isinstance(arguments, dict):
            call.args = {k: v for k, v in arguments.items() if k != "_meta"}
        try:
            call._resolve()
        except VerbError as err:
            return call._error(err)
    return None


#: The log line of a call that raised, by where it was caught: in `dispatch`, or at an edge around
#: it (what an edge runs besides `dispatch`: building deps, the invoker, the SDK's framing).
INTERNAL_LOG = {"internal_error": "unexpected error", "edge_internal_error": "tool call failed at the edge"}


def guarded(
    run: Callable[[], DispatchResult],
    tool: str,
    correlation_id: str,
    *,
    transport: Transport,
    event: str = "internal_error",
) -> DispatchResult:
    """`run()`, or the `internal` answer when it raises: the last line of defence of `dispatch` and
    of every edge in front of it (never leak, always answer)."""
    try:
        return run()
    except Exception as exc:
        return internal_answer(tool, correlation_id, exc, transport=transport, event=event)


def internal_answer(
    tool: str, correlation_id: str, exc: BaseException, *, transport: Transport, event: str = "internal_error"
) -> DispatchResult:
    """The `internal` answer to a call that raised `exc`; the log line says where it was caught."""
    result = internal_result(correlation_id, str(tool), transport=transport)
    # Frames (file, line, function) help the operator; the exception's message and locals may hold
    # SQL, argument values or credentials, so they are never logged.
    frames = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}" for f in traceback.extract_tb(exc.__traceback__)]
    log.error(
        INTERNAL_LOG[event],
        extra={
            "event": event,
            "tool": str(tool)[:64],
            "exc_type": type(exc).__name__,
            "frames": frames[-8:],
            "correlation_id": correlation_id,
        },
    )
    return result


@dataclass
class _Call:
    """One call on its way through the pipeline (`pipeline`), with what its fixes need."""

    tool: str
    raw_arguments: Any
    caller: Caller
    #: None for the surface/scope gate alone (`precheck`), which runs no tool.
    deps: Deps | None
    surface: Surface
    cid: str
    transport: Transport
    #: What this caller may call on this surface (the tools/list filter).
    allowed: dict[str, ToolSpec] = field(init=False)
    #: The arguments as the caller sent them, minus `_meta`: what fixes echo back.
    args: dict[str, Any] = field(init=False, default_factory=dict)
    #: The server's `token create` command, for a scope_denied fix (set by `precheck`).
    token_command: tuple[str, ...] = field(init=False, default=())
    token_inputs: tuple[dict[str, str], ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        self.allowed = {s.name: s for s in visible_tools(self.surface, self.caller)}

    # -- helpers -------------------------------------------------------------------------------

    def _error(self, err: VerbError) -> DispatchResult:
        return error_result(
            err,
            tool=str(self.tool),
            arguments=self.args,
            correlation_id=self.cid,
            transport=self.transport,
            callable_tools=set(self.allowed),
        )

    @property
    def _deps(self) -> Deps:
        if self.deps is None:
            raise RuntimeError("the surface/scope gate (precheck) runs no tool")
        return self.deps

    def _view(self) -> CallView:
        return CallView(str(self.tool), self.args, self.caller, self.surface, frozenset(self.allowed))

    # -- the pipeline --------------------------------------------------------------------------

    def pipeline(self) -> DispatchResult:
        """resolve -> validate -> (dry run) -> execute, idempotently when the call has a key."""
        try:
            spec = self._spec()  # 1. surface and scope, 2. an object of valid text
            notices = self._unknown_params(spec)  # 3. D3
            known = self._known(spec)
            # A read ran without its unknown keys, so every later fix echoes the call without them:
            # an answer's size never grows with the keys a request adds.
            self.args = {k: v for k, v in self.args.items() if k in known}
            args = dict(self.args)
            is_param = IDEMPOTENCY_KEY in _field_names(spec.params)
            key = take_request_id(spec, args, is_param, self._view())  # D2/D22 (taken out of `args`)
            dry_run = self._dry_run_flag(spec, args)  # taken out of `args` unless a parameter
            if batch.is_batch(spec, args):  # remember{items} (D26): each item its own keyed write
                run = batch.RememberBatch(self._deps, spec, self._view(), self.cid, self.transport, self._error)
                run.meta_session_id = meta_session_id(self.raw_arguments)  # D24
                return run.run(args, key, notices, dry_run)
            params = self._validate(spec, args)  # 4. typed parameters
        except VerbError as err:
            return self._error(err)
        if dry_run:
            # The arguments passed the schema; the tool's own rules run only on a real call.
            body = {
                "dry_run": True,
                "tool": spec.name,
                "ran": False,
                "arguments": params.model_dump(mode="json"),
                "protocol_version": PROTOCOL_VERSION,
            }
            return DispatchResult(body, False, notices, self.cid)
        if key is None:
            return self._execute(spec, params, notices)  # 6. run
        return self.keyed_write(spec, params, key, notices)  # 5. + 6.

    def keyed_write(
        self, spec: ToolSpec, params: BaseModel, request_id: RequestId, notices: list[Notice]
    ) -> DispatchResult:
        """Run one keyed write of this call under `request_id` (D2, D22): at most once per id, its
        answer carrying its receipt."""
        view = self._view()
        # a retry (which may find its write stored but not indexed) can only send an id it chose
        run = lambda: self._execute(spec, params, notices, keyed=not request_id.generated)  # noqa: E731
        return run_keyed_write(self._deps, spec, params, request_id, view, self.cid, self._error, run, notices)

    # -- the steps (each raises the VerbError that answers the call) ----------------------------

    def _spec(self) -> ToolSpec:
        bad_text: str | None = None
        if isinstance(self.raw_arguments, dict):
            raw = {k: v for k, v in self.raw_arguments.items() if k != "_meta"}
            bad_text = errors.unencodable_path(raw)
            # What fixes echo back must itself be valid UTF-8.
            self.args = errors.scrub(raw) if bad_text is not None else raw
        spec = self._resolve()
        if self.raw_arguments is not None and not isinstance(self.raw_arguments, dict):
            raise errors.not_an_object(spec)
        if bad_text is not None:
            raise errors.unencodable(self._view(), spec, bad_text)
        return spec

    def _known(self, spec: ToolSpec) -> set[str]:
        return (
            set(_field_names(spec.params))
            | ALWAYS_ALLOWED
            | ({IDEMPOTENCY_KEY, REQUEST_ID} if spec.idempotency else set())
        )

    def _unknown_params(self, spec: ToolSpec) -> list[Notice]:
        fields = _field_names(spec.params)
        unknown = [k for k in self.args if k not in self._known(spec)]
        if unknown and spec.writes:
            raise errors.unknown_on_write(self._view(), spec, unknown, fields)
        return errors.unknown_on_read(self._view(), spec, unknown, fields) if unknown else []

    def _dry_run_flag(self, spec: ToolSpec, args: dict[str, Any]) -> bool:
        if "dry_run" not in args or "dry_run" in _field_names(spec.params):
            return False
        flag = args.pop("dry_run")
        if flag is not None and not isinstance(flag, bool):
            # Never guess "false" for an unclear flag: that would run a write the caller may have
            # meant only to check. The safe reading is offered as the fix.
            raise errors.bad_dry_run(self._view(), spec)
        return flag is True

    def _validate(self, spec: ToolSpec, args: dict[str, Any]) -> BaseModel:
        # A failure is the tool's own invalid_params (fleetmem.memory.params), its fix echoing what
        # the steps above took out of the arguments.
        keep = {k: self.args[k] for k in ("dry_run", IDEMPOTENCY_KEY, REQUEST_ID) if k in self.args and k not in args}
        now = self._deps.clock.now()
        try:
            return spec.params.model_validate(args, context={"tool": spec.name, "now": now, "keep": keep})
        except ValidationError as exc:  # a parameter model that is not a `Params` (test probes)
            raise invalid_from_validation(spec.params, args, exc, tool=spec.name, now=now, keep=keep) from None

    def _resolve(self) -> ToolSpec:
        name = self.tool if isinstance(self.tool, str) else ""
        spec = REGISTRY.get(name)
        if spec is None or not on_surface(spec, self.surface):
            raise errors.unknown_tool(self._view(), name, spec)
        if spec.name not in self.allowed:
            raise errors.scope_denied(self._view(), spec, self.token_command, self.token_inputs)
        return spec

    def _execute(
        self, spec: ToolSpec, params: BaseModel, notices: list[Notice], *, keyed: bool = False
    ) -> DispatchResult:
        policy = self._deps.policy
        deadline = time.monotonic() + policy.deadline_ms / 1000.0 if policy.deadline_ms else None
        ctx = CallContext(
            self.cid,
            deadline_at=deadline,
            transport=self.transport,
            keyed=keyed,
            surface=self.surface,
            meta_session_id=meta_session_id(self.raw_arguments),
        )
        try:
            outcome = spec.run(self._deps, self.caller, params, ctx)
        except VerbError as err:
            return self._error(err)
        except PortError as exc:
            return self._error(errors.port_error(self._view(), spec, exc))
        return DispatchResult(dict(outcome.body), False, notices + list(outcome.notices), self.cid)


def meta_session_id(arguments: Any) -> str | None:
    """`_meta.session_id` of the arguments (MCP's request `_meta` arrives there, `mcp_app`; a `/v1`
    body carries its own): a non-blank string, else None (D24)."""
    meta = arguments.get("_meta") if isinstance(arguments, dict) else None
    session = meta.get("session_id") if isinstance(meta, dict) else None
    return session if isinstance(session, str) and session.strip() else None


def _field_names(model: type[BaseModel]) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names
