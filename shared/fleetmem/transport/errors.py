"""The error answers of the dispatch pipeline (`fleetmem.transport.dispatch`), one function each.

Each returns a `VerbError` that dispatch turns into the one envelope (`fleetmem.contract.envelope`);
what each says and which fix it carries is described in docs/protocol.md ("Errors"). Parameter
validation errors are built by `fleetmem.memory.params.invalid_from_validation`, not here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetmem.contract.tools import IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_MAX
from fleetmem.errors import Conflict, Fix, NotFound, Notice, PortError, TooLarge, Unavailable, VerbError, retry_later
from fleetmem.memory.registry import ToolSpec
from fleetmem.models import Caller
from fleetmem.protocol import IDEMPOTENCY_TTL_HOURS, REQUEST_ID, REQUEST_ID_MAX, Surface

#: How long a caller waits before retrying while the first call with the same key is in flight.
IN_FLIGHT_RETRY_SECONDS = 1
CONFLICT_RETRY_SECONDS = 1


@dataclass(frozen=True)
class CallView:
    """What an error answer may echo: the tool as called, the caller's arguments (minus `_meta`),
    the caller, the surface and the tools this caller can call there."""

    tool: str
    args: dict[str, Any]
    caller: Caller
    surface: Surface
    allowed: frozenset[str]

    def same_call(self, arguments: dict[str, Any], tool: str | None = None) -> dict[str, Any]:
        return {"tool": tool or self.tool, "arguments": arguments}


def not_an_object(spec: ToolSpec) -> VerbError:
    return VerbError(
        "invalid_params",
        f"The arguments of {spec.name} must be a JSON object.",
        f"Send the arguments as an object of named parameters, e.g. {spec.name} {{...}}; "
        f"tools/list shows {spec.name}'s inputSchema.",
        why="Tool arguments are named; a list, string or number cannot be matched to parameters.",
    )


def unknown_tool(call: CallView, name: str, spec: ToolSpec | None) -> VerbError:
    names = sorted(call.allowed)
    listed = ", ".join(names) if names else "(none for this credential)"
    if spec is not None:
        # Exists, but not on this server's surface: only the host's operator can widen it.
        return VerbError(
            "unknown_tool",
            f"No tool named {name!r} on this server's surface.",
            f"This server exposes the '{call.surface}' surface; call one of: {listed}.",
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
            mcp=call.same_call(dict(call.args), close[0]),
        )
    return VerbError(
        "unknown_tool",
        f"No tool named {name[:64]!r}.",
        f"Call one of: {listed}." + (f" Did you mean {close[0]}?" if close else ""),
        why="Tool names come from tools/list; this name is not among them.",
        fix=fix,
    )


#: `token create` when the server names no command of its own (its store is unknown here).
TOKEN_CREATE = ("fleetmem", "token", "create")


def token_create_argv(base: Sequence[str], **options: str) -> list[str]:
    """`base` (a `token create` command) with these options set: each `--name value` given
    replaces the base's value for that option, or is appended when the base has none."""
    argv = list(base or TOKEN_CREATE)
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if flag in argv[:-1]:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return argv


def scope_denied(
    call: CallView,
    spec: ToolSpec,
    token_command: Sequence[str] = (),
    token_inputs: Sequence[dict[str, str]] = (),
) -> VerbError:
    """The fix mints the same client a token with the needed scopes in the caller's OWN tenant
    (a token of another tenant sees another memory) and, given the server's `token_command`, in
    the store that server reads."""
    scopes = sorted({"read", "write"} if spec.scope == "write" else {spec.scope})
    argv = token_create_argv(
        token_command, client=call.caller.client_id, scopes=",".join(scopes), tenant=call.caller.tenant
    )
    return VerbError(
        "scope_denied",
        f"This credential may not call {spec.name} (needs the '{spec.scope}' scope).",
        f"{spec.name} needs a token with the '{spec.scope}' scope; this client's token has "
        f"{', '.join(sorted(call.caller.scopes)) or 'no scopes'}. Ask the memory host's operator "
        f"for a token with '{spec.scope}'.",
        why="Scopes are granted per client token; tools/list shows only what this token may call.",
        detail={"needed_scope": spec.scope, "granted_scopes": sorted(call.caller.scopes)},
        fix=Fix(
            why="Only the memory host's operator can mint a token with more scopes.",
            argv=argv,
            actor="host_admin",
            inputs=tuple(token_inputs),
            user_message=f"My memory token cannot use {spec.name}; it needs the '{spec.scope}' scope. "
            "The memory server's operator can create a token that has it.",
        ),
    )


#: Unknown parameter names an answer spells out (the rest are counted): an answer's size must not
#: grow with the number of keys a request sends.
UNKNOWN_SHOWN = 10
#: Characters of one unknown name an answer repeats.
UNKNOWN_NAME_CHARS = 64


def _named(unknown: list[str]) -> str:
    names = ", ".join(f"`{k[:UNKNOWN_NAME_CHARS]}`" for k in unknown[:UNKNOWN_SHOWN])
    more = len(unknown) - UNKNOWN_SHOWN
    return names + (f" and {more} more" if more > 0 else "")


#: D31: read parameters of the reference (gbrain 0.60) that a fleetmem read may not take, each with
#: a meaning of its own: a read's notice never renames one to the closest fleetmem name
#: (`budget_policy` is not `budget_tokens`, `include_quarantined` not `include_private`).
REFERENCE_READ_NAMES = frozenset(
    {
        "budget_policy",
        "cursor",
        "include_quarantined",
        "min_trust",
        "names",
        "request_id",
        "return_unit",
        "return_window",
        "source_id",
    }
)


def _renames(
    call: CallView, unknown: list[str], fields: list[str], keep: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Closest known names for the first unknown names (a known name already given is kept; a name
    in `keep` is never renamed)."""
    out: dict[str, str] = {}
    for key in unknown[:UNKNOWN_SHOWN]:
        if key in keep:
            continue
        close = difflib.get_close_matches(key[:UNKNOWN_NAME_CHARS], fields, n=1, cutoff=0.6)
        if close and close[0] not in call.args and close[0] not in out.values():
            out[key] = close[0]
    return out


def unknown_on_write(call: CallView, spec: ToolSpec, unknown: list[str], fields: list[str]) -> VerbError:
    renames = _renames(call, unknown, fields)
    dropped = set(unknown)
    fixed = {k: v for k, v in call.args.items() if k not in dropped}
    fixed.update({close: call.args[key] for key, close in renames.items()})
    plural = "parameters" if len(unknown) > 1 else "parameter"
    how = (
        "renamed "
        + ", ".join(f"{k[:UNKNOWN_NAME_CHARS]} -> {c}" for k, c in renames.items())
        + (" and without the other unknown parameters" if len(unknown) > len(renames) else "")
        if renames
        else "without the unknown parameter(s)"
    )
    return VerbError(
        "invalid_params",
        f"{spec.name} does not take {len(unknown)} unknown {plural}: {_named(unknown)}."
        if len(unknown) > 1
        else f"{spec.name} does not take {_named(unknown)}.",
        f"{spec.name} writes, so it refuses parameters it does not know rather than guess. "
        f"Known parameters: {', '.join(fields)}. Send the same call {how}.",
        why="An unknown parameter on a write usually means a typo that would silently change what "
        "is stored; nothing was written.",
        detail={
            "unknown_params": [k[:UNKNOWN_NAME_CHARS] for k in unknown[:UNKNOWN_SHOWN]],
            "unknown_count": len(unknown),
        },
        fix=Fix(why=f"The same call {how}; nothing was written.", mcp=call.same_call(fixed)),
    )


def unknown_on_read(call: CallView, spec: ToolSpec, unknown: list[str], fields: list[str]) -> list[Notice]:
    """ONE notice however many unknown names the call sent: the first few named, the rest counted;
    no rename is offered for a reference parameter (`REFERENCE_READ_NAMES`)."""
    renames = _renames(call, unknown, fields, REFERENCE_READ_NAMES)
    fix = None
    if renames:
        dropped = set(unknown)
        fixed = {k: v for k, v in call.args.items() if k not in dropped}
        fixed.update({close: call.args[key] for key, close in renames.items()})
        fix = Fix(
            why="The same call with "
            + ", ".join(f"`{k[:UNKNOWN_NAME_CHARS]}` as `{c}`" for k, c in renames.items())
            + f", the closest parameter{'s' if len(renames) > 1 else ''} {spec.name} knows.",
            mcp=call.same_call(fixed),
        )
    hints = "".join(
        f" (did you mean `{c}` for `{k[:UNKNOWN_NAME_CHARS]}`?)" if len(unknown) > 1 else f" (did you mean `{c}`?)"
        for k, c in renames.items()
    )
    what = (
        f"the unknown parameter {_named(unknown)}"
        if len(unknown) == 1
        else f"{len(unknown)} unknown parameters: {_named(unknown)}"
    )
    return [
        Notice(
            code="unknown_param",
            kind="info",
            why=f"{spec.name} ignored {what}{hints}. Known parameters: {', '.join(fields)}.",
            fix=fix,
        )
    ]


def unencodable(call: CallView, spec: ToolSpec, path: str) -> VerbError:
    return VerbError(
        "invalid_params",
        f'Parameter "{path}" holds text that is not valid Unicode (an unpaired surrogate).',
        "Send text as valid UTF-8; the fix replaces each unpaired surrogate with U+FFFD.",
        why="Unpaired UTF-16 surrogates cannot be stored or returned as UTF-8; nothing was written.",
        detail={"field": path},
        fix=Fix(
            why="The same call with the invalid characters replaced; nothing changed.",
            mcp=call.same_call(scrub(call.args)),
        ),
    )


def bad_dry_run(call: CallView, spec: ToolSpec) -> VerbError:
    return VerbError(
        "invalid_params",
        'Parameter "dry_run" must be true or false.',
        f"Pass dry_run as a JSON boolean: true checks the {spec.name} call without running it, "
        "false (or leaving it out) runs it.",
        why="An unclear dry_run is not guessed; nothing ran.",
        fix=Fix(
            why="The same call as a dry run: it validates the arguments and changes nothing.",
            mcp=call.same_call({**call.args, "dry_run": True}),
        ),
    )


def bad_key(call: CallView, spec: ToolSpec) -> VerbError:
    return _key_refused(
        call,
        f'Parameter "{IDEMPOTENCY_KEY}" must be a non-empty string of at most {IDEMPOTENCY_KEY_MAX} characters.',
        f"Pass a unique string per logical write (a UUID works) as `{IDEMPOTENCY_KEY}`, or leave it out.",
        why="The key identifies one logical write across retries.",
        fix_why="The same call without the idempotency key; nothing changed.",
    )


def key_conflict(call: CallView, spec: ToolSpec) -> VerbError:
    err = _key_refused(
        call,
        f"This request_id ({IDEMPOTENCY_KEY}) was already used for a different write.",
        "Reuse a request_id (or idempotency_key) only to retry the SAME call; for a new write use a new "
        "request_id or leave it out.",
        why=f"Request ids are scoped to this client for {IDEMPOTENCY_TTL_HOURS} h; the first write with "
        "this id was another tool or had different arguments, so replaying its result would be wrong. "
        "Nothing was written.",
        fix_why="The same call without the reused key; nothing was written.",
        detail={"reason": "idempotency_key_reused"},
        drop=(REQUEST_ID,),
    )
    err.write_error = "idempotency_conflict"  # D22, as the reference spells it
    return err


def _key_refused(
    call: CallView,
    message: str,
    suggestion: str,
    *,
    why: str,
    fix_why: str,
    detail: Any = None,
    drop: tuple[str, ...] = (),
) -> VerbError:
    """`invalid_params` for the call's idempotency key; the fix is the same call without it (and
    without the `drop` arguments)."""
    fixed = {k: v for k, v in call.args.items() if k != IDEMPOTENCY_KEY and k not in drop}
    fix = Fix(why=fix_why, mcp=call.same_call(fixed))
    return VerbError("invalid_params", message, suggestion, why=why, detail=detail, fix=fix)


def bad_request_id(call: CallView) -> VerbError:
    return _key_refused(
        call,
        f'Parameter "{REQUEST_ID}" must be 1-{REQUEST_ID_MAX} printable ASCII characters (no spaces).',
        f"Pass one id per logical write (a UUID works) as `{REQUEST_ID}`, or leave it out and the server makes one.",
        why="The request id names one write across retries; it is kept as given only within that alphabet.",
        fix_why="The same call without the request id; the server makes one.",
        drop=(REQUEST_ID,),
    )


def two_request_ids(call: CallView) -> VerbError:
    return _key_refused(
        call,
        f"{REQUEST_ID} and {IDEMPOTENCY_KEY} name different requests.",
        f"Send one of them: `{IDEMPOTENCY_KEY}` is the older name of `{REQUEST_ID}`.",
        why="One write has one request id; two different ones cannot both be its identity.",
        fix_why=f"The same call with {REQUEST_ID} alone.",
    )


def write_pending(call: CallView, spec: ToolSpec, request_id: str) -> VerbError:
    """D22: the write with this request id is still running (the wait ran out): poll its receipt."""
    poll = {"tool": "get_write_request", "arguments": {REQUEST_ID: request_id}}
    how = (
        "Poll get_write_request with the same request_id"
        if "get_write_request" in call.allowed
        else (f"Retry the same call with the same {REQUEST_ID} (it answers with the first write's result)")
    )
    err = VerbError(
        "unavailable",
        f"The {spec.name} write with this request id is still running.",
        f"{how} until its state is terminal; do not send the write again under a new id.",
        why="This call waited for the first write with the same request id, which had not finished in time. "
        "Its outcome is not known yet; the receipt says when it is.",
        detail={"reason": "idempotency_in_flight"},
        fix=Fix(
            why="The write's own receipt tells whether it committed.",
            mcp=poll if "get_write_request" in call.allowed else call.same_call(dict(call.args)),
            verify={"mcp": poll},
            retry_after_seconds=IN_FLIGHT_RETRY_SECONDS,
        ),
        retryable=True,
    )
    err.write_error = "write_pending"
    return err


def in_flight(call: CallView, spec: ToolSpec) -> VerbError:
    return retry_later(
        f"The first {spec.name} call with this {IDEMPOTENCY_KEY} is still running.",
        wait_s=IN_FLIGHT_RETRY_SECONDS,
        why="This call waited for the first call with the same key, which had not finished in time; "
        "the retry returns the first call's result.",
        fix_why="Retrying with the same key returns the first call's result once it is stored.",
        reason="idempotency_in_flight",
        mcp=call.same_call(dict(call.args)),
    )


def port_error(call: CallView, spec: ToolSpec, exc: PortError) -> VerbError:
    same = call.same_call(dict(call.args))
    if isinstance(exc, Unavailable):
        detail = {"reason": exc.reason} if exc.reason else None
        if exc.retry_after_seconds is not None:
            return retry_later(
                f"A service {spec.name} depends on is busy or briefly unavailable.",
                wait_s=int(exc.retry_after_seconds),
                why="The storage or model provider throttled or refused the request; it recovers on its own.",
                fix_why="The same call after the provider's stated delay.",
                reason=exc.reason,
                mcp=same,
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
        return retry_later(
            f"{spec.name} lost a race with a concurrent write.",
            wait_s=CONFLICT_RETRY_SECONDS,
            why="Another call changed the same item between read and write; nothing was half-written.",
            fix_why="A retry reads the new state and applies the call to it.",
            reason="conflict",
            mcp=same,
        )
    if isinstance(exc, NotFound):
        return VerbError(
            "not_found",
            f"{spec.name} found nothing with that id for this caller.",
            "Check the id: use an id returned by remember or recall (fact_id), or a page slug entity(name) shows.",
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


def unencodable_path(value: Any, path: str = "") -> str | None:
    """Dotted path of the first string (or key) holding an unpaired surrogate, else None."""
    if isinstance(value, str):
        return (path or "arguments") if _SURROGATES.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _SURROGATES.search(k):
                return _SURROGATES.sub("\ufffd", sub)
            found = unencodable_path(v, sub)
            if found is not None:
                return _SURROGATES.sub("\ufffd", found)
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = unencodable_path(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value
