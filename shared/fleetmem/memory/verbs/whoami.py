"""`whoami()` — the caller as the server sees it (full surface, read scope).

Public API: `WhoamiParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).
Response `{tenant, client_id, scopes, remote, surface, protocol_version}`: the tenant and scopes
come from the credential, so a client (the memory console) can show what a token may see and do
without guessing from tools/list.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.memory.registry import ToolSpec, register
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SCOPES, Scope, Surface

TOOL = "whoami"


class WhoamiParams(Params):
    model_config = ConfigDict(extra="ignore")


class WhoamiResult(Wire):
    tenant: str
    client_id: str
    scopes: list[Scope] = Field(description="The credential's scopes, in the order read, write, admin.")
    remote: bool = Field(description="true: the server treats the caller as remote (world facts and pages only).")
    surface: Surface
    protocol_version: int


def run(deps: Deps, caller: Caller, params: WhoamiParams, ctx: CallContext) -> Outcome:
    result = WhoamiResult(
        tenant=caller.tenant,
        client_id=caller.client_id,
        scopes=[s for s in SCOPES if s in caller.scopes],
        remote=caller.remote,
        surface="full",
        protocol_version=PROTOCOL_VERSION,
    )
    return Outcome(body=result.model_dump())


SPEC = register(
    ToolSpec(
        name=TOOL,
        description=(
            "Who the server takes the caller to be: tenant, client id, scopes and whether it is treated as "
            "remote. Example: {}. Use it to check a token before acting on its behalf."
        ),
        params=WhoamiParams,
        result=WhoamiResult,
        run=run,
        scope="read",
        surface="full",
        writes=False,
        annotations={"readOnlyHint": True, "idempotentHint": True},
    )
)
