"""`create_token(client, scopes)` — mint an API token in the caller's tenant (full surface, admin, write).

Public API: `CreateTokenParams`, `CreateTokenResult`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`.

The same minting code as `fleetmem token create` (`fleetmem.tokens.mint_request` + `mint`): the
client name follows the id grammar, `scopes` is a non-empty subset of read, write, admin. The new
token's scopes must be a subset of the scopes the calling token holds (no token mints one with more
than itself): anything else is `scope_denied`, whose fix is the same call with the scopes narrowed.
The tenant is the caller's. Response `{token (shown once), token_id, client_id, scopes, created_at,
protocol_version}`; no idempotency key (a replay would show the token twice). The clients table
keeps who and when (created_at); the audit log's actions are about facts and pages only.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from fleetmem.errors import Fix, Outcome, VerbError
from fleetmem.memory.common import invalid
from fleetmem.memory.params import Params
from fleetmem.memory.registry import ADDS, write_tool
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SCOPES, Scope
from fleetmem.timefmt import iso
from fleetmem.tokens import ID_FIX, MintRefused, TenantDeleted, mint, mint_request

TOOL = "create_token"
CLIENT_MAX = 64


class CreateTokenParams(Params):
    client: str = Field(
        min_length=1,
        max_length=CLIENT_MAX,
        description='Client name the token stands for (shown in audit rows and cursors), e.g. "my-agent": '
        "lower-case letters, digits, '_' or '-', starting with a letter or digit.",
    )
    scopes: list[Scope] = Field(
        min_length=1,
        max_length=len(SCOPES),
        description='Scopes of the new token, a subset of this token\'s own, e.g. ["read", "write"].',
    )


class CreateTokenResult(Wire):
    token: str
    token_id: str
    client_id: str
    scopes: list[Scope]
    created_at: str
    protocol_version: int


def scopes_denied(caller: Caller, params: CreateTokenParams, extra: Sequence[str]) -> VerbError:
    allowed = sorted(s for s in set(params.scopes) if s in caller.scopes)
    why = "A token can only mint tokens with scopes it holds itself."
    return VerbError(
        "scope_denied",
        f"This credential may not grant the scope(s) {', '.join(extra)}.",
        f"create_token asked for {', '.join(sorted(set(params.scopes)))}; this token holds "
        f"{', '.join(sorted(caller.scopes)) or 'no scopes'}. Cause: {why} Fix: ask only for scopes this "
        "token holds, or have the memory host's operator mint the token.",
        why=why,
        detail={"asked_scopes": sorted(set(params.scopes)), "granted_scopes": sorted(caller.scopes)},
        fix=Fix(why="The same call with the scopes this token holds.", amend={"scopes": allowed})
        if allowed
        else Fix(why="Only the memory host's operator can mint a token with more scopes.", actor="host_admin"),
        klass="caller" if allowed else "host_only",
    )


def run(deps: Deps, caller: Caller, params: CreateTokenParams, ctx: CallContext) -> Outcome:
    extra = sorted(set(params.scopes) - caller.scopes)
    if extra:
        raise scopes_denied(caller, params, extra)
    try:
        request = mint_request(tenant=caller.tenant, client=params.client, scopes=params.scopes)
    except MintRefused as refused:
        raise invalid(
            TOOL,
            params,
            refused.message,
            problem="The client name is not allowed.",
            cause=ID_FIX,
            field="client",
            no_fix='pass a client name such as "my-agent"',
        ) from None
    try:
        token, record = mint(deps.clients, deps.clock, request)
    except TenantDeleted:
        # the tenant is being deleted: its credentials are revoked, whatever a cache still lets in
        raise VerbError(
            "unauthorized",
            "This credential was revoked.",
            "Ask the memory host's operator for a valid token.",
        ) from None
    body = CreateTokenResult.model_validate(
        {
            "token": token,
            "token_id": record.token_id,
            "client_id": record.client_id,
            "scopes": sorted(record.scopes),
            "created_at": iso(record.created_at),
            "protocol_version": PROTOCOL_VERSION,
        }
    )
    return Outcome(body=body.model_dump())


DESCRIPTION = (
    "Admin: mint an API token for a client of this brain, with scopes this token holds; the token is "
    'shown once. Example: {"client": "my-agent", "scopes": ["read", "write"]}. List tokens with '
    "list_tokens, revoke with revoke_token."
)

SPEC = write_tool(TOOL, DESCRIPTION, CreateTokenParams, CreateTokenResult, run, annotations=ADDS, scope="admin")
