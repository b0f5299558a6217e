"""export_pack (admin) — the caller's tenant, an entity or a selection as a memory pack, in one call.

Public API: `ExportPackParams`, `ExportPackResult`, `run`, `SPEC`, `PACK_CALL_MAX_BYTES`.

The pack is the file `fleetmem export` writes (docs/portability.md: a gzip tar of manifest.json,
pages.jsonl, facts.jsonl, audit.jsonl), base64 in `pack`. A remote caller's pack holds world pages
and facts only (and their audit events), as every tool shows a remote caller. A pack travels whole
in one answer, so it is at most `PACK_CALL_MAX_BYTES` (under Lambda's 6 MB payload once encoded);
a larger one is refused with `invalid_params` naming a narrower export or `fleetmem export`.
"""

from __future__ import annotations

import base64
from typing import Literal

from pydantic import ConfigDict, Field

from fleetmem.errors import Outcome, VerbError
from fleetmem.memory.params import Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SLUG_MAX
from fleetmem.timefmt import parse_iso

TOOL = "export_pack"
#: The largest pack one call carries (export_pack's answer, import_pack's argument): 3 MB, 4 MB as
#: base64, under Lambda's 6 MB synchronous payload with room for the envelope.
PACK_CALL_MAX_BYTES = 3 * 1024 * 1024


class ExportPackParams(Params):
    model_config = ConfigDict(extra="ignore")

    entity: str | None = Field(
        None, max_length=SLUG_MAX, description='Only this entity\'s page and facts, e.g. "acme".'
    )
    since: str | None = Field(
        None,
        max_length=64,
        description='Only what changed after this ISO 8601 time, e.g. "2026-06-01".',
    )
    state: Literal["active", "forgotten", "superseded", "expired"] | None = Field(
        None, description="Only facts in this state (and no pages)."
    )


class ExportPackResult(Wire):
    pack: str
    bytes: int
    filename: str
    counts: dict[str, int]
    protocol_version: int


def unavailable(tool: str) -> VerbError:
    return VerbError(
        "unavailable",
        f"{tool}: this server has no pack support wired.",
        "Use the CLI where the stores are reachable: fleetmem export / fleetmem import --pack.",
        klass="unavailable",
    )


def run(deps: Deps, caller: Caller, params: ExportPackParams, ctx: CallContext) -> Outcome:
    if deps.packs is None:
        raise unavailable(TOOL)
    try:
        since = parse_iso(params.since) if params.since else None
    except (ValueError, OverflowError):
        raise VerbError(
            "invalid_params",
            f"since {(params.since or '')[:64]!r} is not an ISO 8601 date or time.",
            'Pass e.g. since="2026-06-01" or since="2026-06-01T09:30:00Z".',
        ) from None
    entity = (params.entity or "").strip() or None
    data, counts = deps.packs.export(
        deps,
        tenant=caller.tenant,
        entity=entity,
        since=since,
        state=params.state,
        world_only=caller.remote,
        max_bytes=PACK_CALL_MAX_BYTES,
    )
    name = "-".join(p for p in (caller.tenant, entity and entity.replace("/", "-"), params.state) if p)
    body = ExportPackResult(
        pack=base64.b64encode(data).decode("ascii"),
        bytes=len(data),
        filename=f"{name}.fmpack",
        counts=counts,
        protocol_version=PROTOCOL_VERSION,
    )
    return Outcome(body.model_dump())


DESCRIPTION = (
    "Admin: export this brain (or one entity, a state, or what changed since a time) as a memory pack, "
    'the file `fleetmem export` writes, base64 in `pack`, e.g. export_pack(entity="acme"). Read-only. '
    "At most 3 MB per call: for more, narrow it or run `fleetmem export`."
)

SPEC = read_tool(TOOL, DESCRIPTION, ExportPackParams, ExportPackResult, run, scope="admin")
