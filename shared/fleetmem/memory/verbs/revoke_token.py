"""`revoke_token(token_id)` — revoke one of this tenant's API tokens (full surface, admin, write).

Public API: `RevokeTokenParams`, `RevokeTokenResult`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`.

`token_id` is the public handle (`tok_…`) list_tokens shows. A token id of another tenant is
`not_found`, exactly like a missing one. Response `{token_id, revoked, protocol_version}`: `revoked`
is true when this call revoked it, false when it already was (nothing changes). Requests with the
token are refused from the next one on (on AWS within the authorizer cache TTL). The token's row
keeps when it was revoked (revoked_at, shown by list_tokens).
"""

from __future__ import annotations

from pydantic import Field

from fleetmem.errors import Fix, Outcome, VerbError
from fleetmem.memory.params import Params
from fleetmem.memory.registry import REMOVES_IDEMPOTENT, write_tool
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION

TOOL = "revoke_token"
TOKEN_ID_MAX = 64


class RevokeTokenParams(Params):
    token_id: str = Field(
        max_length=TOKEN_ID_MAX,
        description='The token\'s public id from list_tokens, e.g. "tok_3f2a9c01be" (never the token itself).',
    )


class RevokeTokenResult(Wire):
    token_id: str
    revoked: bool
    protocol_version: int


def token_not_found(token_id: str) -> VerbError:
    why = "Token ids come from list_tokens (the token_id column, not the token itself)."
    return VerbError(
        "not_found",
        "No token with that id exists in this brain.",
        f"revoke_token found no token with id {token_id!r}. Cause: {why} Fix: list the tokens and pass one's token_id.",
        why=why,
        fix=Fix(
            why="list_tokens shows every token of this brain with its token_id.",
            mcp={"tool": "list_tokens", "arguments": {}},
            verify={"mcp": {"tool": "list_tokens", "arguments": {}}},
        ),
        klass="caller",
    )


def run(deps: Deps, caller: Caller, params: RevokeTokenParams, ctx: CallContext) -> Outcome:
    token_id = params.token_id.strip()
    record = (
        next(
            (r for r in deps.clients.list(caller.tenant) if r.token_id == token_id and r.tenant == caller.tenant),
            None,
        )
        if token_id
        else None
    )
    if record is None:
        raise token_not_found(token_id)
    now = deps.clock.now()
    revoked = record.revoked_at is None and deps.clients.revoke(token_id, at=now, tenant=caller.tenant)
    body = RevokeTokenResult(token_id=token_id, revoked=revoked, protocol_version=PROTOCOL_VERSION)
    return Outcome(body=body.model_dump())


DESCRIPTION = (
    "Admin: revoke one of this brain's API tokens by its token_id (from list_tokens); requests with it "
    'are refused from then on. Example: {"token_id": "tok_3f2a9c01be"}. Irreversible: mint a new '
    "token with create_token instead."
)

SPEC = write_tool(
    TOOL, DESCRIPTION, RevokeTokenParams, RevokeTokenResult, run, annotations=REMOVES_IDEMPOTENT, scope="admin"
)
