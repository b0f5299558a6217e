"""The reference's write-target parameters on remember and forget (docs/protocol.md D27):
`source_id`, `expected_revision` and `force` (remember), `source_id` (forget).

A fleetmem credential reaches exactly one brain, which is its one source: `source_id` may name it
(`"default"`, or the brain's own id) and changes nothing; any other source is outside the
credential's grant (`scope_denied`, whose fix leaves `source_id` out). `expected_revision` is a
page revision in the reference, whose remember rewrites the entity's page file; a fleetmem fact
never rewrites a page, so no revision it names can be stale: it is checked for its form (a UUID)
and otherwise changes nothing, like `force`. The two are mutually exclusive, as the reference says.

Public API: `DEFAULT_SOURCE`, `check_source(tool, params, caller)`, `check_revision(tool, params)`.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from fleetmem.errors import Fix, VerbError
from fleetmem.memory.common import given_args, invalid
from fleetmem.models import Caller

#: the one source every brain has (the reference's default source's name)
DEFAULT_SOURCE = "default"


def check_source(tool: str, params: BaseModel, caller: Caller) -> None:
    """`source_id` names this brain (or is absent/blank), else `scope_denied`."""
    source = getattr(params, "source_id", None)
    if source is None or not source.strip() or source.strip() in (DEFAULT_SOURCE, caller.tenant):
        return
    args: dict[str, Any] = {k: v for k, v in given_args(params).items() if k != "source_id"}
    raise VerbError(
        "scope_denied",
        f"source_id {source.strip()[:80]!r} is outside this credential's grant.",
        f"{tool} writes only to the brain this credential belongs to. Cause: this credential reaches one "
        f'source, its own brain ("{DEFAULT_SOURCE}"). Fix: call {tool} again without `source_id`, or ask '
        "the brain's owner for a credential of the other brain.",
        why="A credential reaches exactly one brain; another source is outside its grant.",
        detail={"reason": "source_not_granted", "sources": [DEFAULT_SOURCE]},
        fix=Fix(
            why="Without source_id the write goes to this credential's brain.", mcp={"tool": tool, "arguments": args}
        ),
        klass="caller",
    )


def check_revision(tool: str, params: BaseModel) -> None:
    """`expected_revision` is a UUID and is not sent with `force: true`."""
    revision = getattr(params, "expected_revision", None)
    if revision is None:
        return
    try:
        uuid.UUID(revision)
    except ValueError:
        raise invalid(
            tool,
            params,
            "expected_revision is not a revision id.",
            problem=f"expected_revision {revision[:60]!r} is not a UUID.",
            cause="a revision id is the UUID a read returned; a fact never rewrites a page, so it is only checked "
            "for its form.",
            field="expected_revision",
            drop=True,
        ) from None
    if getattr(params, "force", None) is True:
        raise invalid(
            tool,
            params,
            "expected_revision and force cannot be sent together.",
            problem="`force: true` ignores the revision that `expected_revision` asks to check.",
            cause="the two are mutually exclusive.",
            field="force",
            drop=True,
        )
