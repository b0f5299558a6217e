"""import_pack (admin) — load a memory pack (base64) into the caller's tenant, or check it first.

Public API: `ImportPackParams`, `ImportPackResult`, `run`, `SPEC`.

The same checks as `fleetmem import --pack` (docs/portability.md): the format and version, every
member against the manifest's checksums and every line against its model and the verbs' limits —
nothing is written unless the whole pack passes — and the tenant: a pack exported from another
tenant is loaded only when `from_tenant` names it. `dry_run: true` writes nothing and reports what
would be written, unchanged and kept (stored differently and not older: left as it is). Writing is
idempotent item by item, so importing a pack again changes nothing. At most 3 MB per call.
"""

from __future__ import annotations

import base64
import binascii

from pydantic import ConfigDict, Field

from fleetmem.errors import Outcome, VerbError
from fleetmem.memory.params import Params
from fleetmem.memory.registry import REMOVES_IDEMPOTENT, write_tool
from fleetmem.memory.verbs.export_pack import PACK_CALL_MAX_BYTES, unavailable
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION

TOOL = "import_pack"


class ImportPackParams(Params):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"required": ["pack"]})

    pack: str = Field(
        "",
        max_length=(PACK_CALL_MAX_BYTES + 2) // 3 * 4,
        description="The pack file (`fleetmem export`, export_pack) as base64.",
    )
    dry_run: bool = Field(False, description="true: check the pack and report what would change; write nothing.")
    from_tenant: str | None = Field(
        None, max_length=200, description="The tenant the pack was exported from, to load it into yours."
    )


class ImportPackResult(Wire):
    dry_run: bool
    tenant: str
    pack_tenant: str
    total: dict[str, int]
    written: dict[str, int]
    unchanged: dict[str, int]
    kept: list[str]
    kept_count: int
    search_problem: str | None
    protocol_version: int


def run(deps: Deps, caller: Caller, params: ImportPackParams, ctx: CallContext) -> Outcome:
    if deps.packs is None:
        raise unavailable(TOOL)
    try:
        data = base64.b64decode(params.pack, validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if not data:
        raise VerbError(
            "invalid_params",
            "pack is empty or not base64; nothing was written.",
            "Pass the pack file's bytes as base64 in `pack`.",
        )
    done = deps.packs.load(
        deps, tenant=caller.tenant, data=data, from_tenant=params.from_tenant, dry_run=params.dry_run
    )
    body = ImportPackResult.model_validate({**done, "protocol_version": PROTOCOL_VERSION})
    return Outcome(body.model_dump())


DESCRIPTION = (
    "Admin: import a memory pack (the file `fleetmem export` or export_pack writes, base64 in `pack`) "
    'into this brain, checked whole first; e.g. import_pack(pack="H4sI...", dry_run=true) reports what '
    "would be written, unchanged and kept without writing. Importing again changes nothing. At most 3 MB; "
    "for more, run `fleetmem import --pack`."
)

SPEC = write_tool(
    TOOL, DESCRIPTION, ImportPackParams, ImportPackResult, run, annotations=dict(REMOVES_IDEMPOTENT), scope="admin"
)
