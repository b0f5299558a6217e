"""`list_tokens()` — this tenant's API tokens (full surface, admin, read-only).

Public API: `ListTokensParams`, `ListTokensResult`, `TokenRow`, `token_row(record)`, `run`, `SPEC`.
No parameters. Response `{tokens[{token_id, client_id, scopes, created_at, revoked_at, last_used_at}],
protocol_version}`, oldest first: the caller's tenant only (the credential decides it), never a token
or its hash.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, ClientRecord, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, Scope
from fleetmem.timefmt import iso

TOOL = "list_tokens"


class ListTokensParams(Params):
    pass


class TokenRow(Wire):
    token_id: str
    client_id: str
    scopes: list[Scope]
    created_at: str
    revoked_at: str | None
    last_used_at: str | None = Field(
        default=None, description="When the token last authenticated a call (recorded at most once a minute)."
    )


class ListTokensResult(Wire):
    tokens: list[TokenRow]
    protocol_version: int


def token_row(record: ClientRecord) -> dict[str, Any]:
    return {
        "token_id": record.token_id,
        "client_id": record.client_id,
        "scopes": sorted(record.scopes),
        "created_at": iso(record.created_at),
        "revoked_at": iso(record.revoked_at),
        "last_used_at": iso(record.last_used_at),
    }


def run(deps: Deps, caller: Caller, params: ListTokensParams, ctx: CallContext) -> Outcome:
    records = [r for r in deps.clients.list(caller.tenant) if r.tenant == caller.tenant]
    records.sort(key=lambda r: (r.created_at, r.token_id))
    body = ListTokensResult.model_validate(
        {"tokens": [token_row(r) for r in records], "protocol_version": PROTOCOL_VERSION}
    )
    return Outcome(body=body.model_dump())


DESCRIPTION = (
    "Admin: list this brain's API tokens (token_id, client, scopes, created, revoked, last used); never the "
    "tokens themselves. Takes no arguments. Revoke one with revoke_token(token_id=...)."
)

SPEC = read_tool(TOOL, DESCRIPTION, ListTokensParams, ListTokensResult, run, scope="admin")
