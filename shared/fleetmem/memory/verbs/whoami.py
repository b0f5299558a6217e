"""`whoami()` — who this credential is (full surface, read, read-only).

Public API: `WhoamiParams`, `WhoamiResult`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`.
No parameters. Response `{tenant, client_id, scopes (sorted), remote, surface, protocol_version}`:
the tenant and client come from the credential only; `surface` is the one the call was made on.
"""

from __future__ import annotations

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, Scope, Surface

TOOL = "whoami"


class WhoamiParams(Params):
    pass


class WhoamiResult(Wire):
    tenant: str
    client_id: str
    scopes: list[Scope]
    remote: bool
    surface: Surface
    protocol_version: int


def run(deps: Deps, caller: Caller, params: WhoamiParams, ctx: CallContext) -> Outcome:
    body = WhoamiResult.model_validate(
        {
            "tenant": caller.tenant,
            "client_id": caller.client_id,
            "scopes": sorted(caller.scopes),
            "remote": caller.remote,
            "surface": ctx.surface,
            "protocol_version": PROTOCOL_VERSION,
        }
    )
    return Outcome(body=body.model_dump())


DESCRIPTION = (
    "Who this credential is: its tenant (brain), client id and scopes, and the server's surface. "
    "Takes no arguments. Example: {}."
)

SPEC = read_tool(TOOL, DESCRIPTION, WhoamiParams, WhoamiResult, run)
