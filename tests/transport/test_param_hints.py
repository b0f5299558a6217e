"""Typed parameters and their fix hints: for every tool and every field that declares a `Hint`, a
value of the wrong type answers `invalid_params` through dispatch, naming that field, and its fix
(when there is one) is a call that passes validation — the same call with only that field changed."""

from __future__ import annotations

import base64
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.params import Hint
from fleetmem.memory.verbs import REGISTRY
from fleetmem.models import Caller
from fleetmem.pack import PackWriter
from fleetmem.pack_format import PackFilter
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

#: The smallest valid arguments of each tool.
BASE: dict[str, dict[str, object]] = {
    "remember": {"fact": "Alice likes tea", "provenance": "chat"},
    "recall": {},
    "entity": {"name": "Alice"},
    "context_pack": {"entities": "people/alice"},
    "delta": {"session_id": "hb"},
    "forget": {"id": "f_1"},
    "synthesize": {"question": "What does Alice like?"},
    "put_page": {"slug": "people/alice", "content": "# Alice"},
    "get_page": {"slug": "people/alice"},
    "list_pages": {},
    "delete_page": {"slug": "people/alice"},
    "purge_fact": {"id": "f_1"},
    "trace_fact": {"id": "f_1"},
    "whoami": {},
    "list_facts": {},
    "export_pack": {},
    "import_pack": {"pack": "<an empty pack of t1>", "dry_run": True},
    "list_activity": {},
    "memory_stats": {},
    "list_followers": {},
    "list_tokens": {},
    "create_token": {"client": "agent-b", "scopes": ["read"]},
    "revoke_token": {"token_id": "tok_0000000000"},
    "get_write_request": {"request_id": "r-1"},
    "list_write_requests": {},
    "cancel_write_request": {"request_id": "r-1"},
}


def _empty_pack(tenant: str) -> str:
    """A real pack (the writer `fleetmem export` uses) of a tenant with nothing in it, base64."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "empty.fmpack"
        with PackWriter(path, tenant=tenant, filter=PackFilter(), now=datetime(2026, 12, 1, tzinfo=UTC)) as writer:
            writer.finish()
        return base64.b64encode(path.read_bytes()).decode("ascii")


BASE["import_pack"]["pack"] = _empty_pack("t1")

HINTED = [
    (tool, name)
    for tool, spec in sorted(REGISTRY.items())
    for name, info in spec.params.model_fields.items()
    if any(isinstance(m, Hint) for m in info.metadata)
]
ADMIN = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"admin"}), remote=True)


def test_every_tool_has_base_arguments_and_the_typed_fields_carry_hints() -> None:
    assert set(BASE) == set(REGISTRY)
    # The fields that used to be re-validated by hand now declare their correction.
    assert {
        ("recall", "budget_tokens"),
        ("recall", "limit"),
        ("delta", "since"),
        ("forget", "id"),
        ("remember", "kind"),
        ("remember", "provenance"),
        ("put_page", "visibility"),
    } <= set(HINTED)


@pytest.mark.parametrize(("tool", "field"), HINTED)
def test_a_wrong_type_is_invalid_params_on_that_field_with_a_fix_that_validates(
    deps: Deps, tool: str, field: str
) -> None:
    args = {**BASE[tool], field: {"not": "a value"}}
    r = dispatch(tool, args, ADMIN, deps)
    assert r.is_error and r.body["code"] == "invalid_params", r.body
    assert any(e["field"].split(".")[0] == field for e in r.body["detail"]["errors"])
    fix = r.body.get("fix")
    if fix is None or "mcp" not in fix:
        return  # no corrected call keeps the caller's meaning (e.g. an unusable fact text)
    assert fix["mcp"]["tool"] == tool
    fixed = fix["mcp"]["arguments"]
    others = {k: v for k, v in BASE[tool].items() if k != field}
    assert {k: v for k, v in fixed.items() if k != field} == others  # the other arguments kept
    try:
        REGISTRY[tool].params.model_validate(fixed)
    except VerbError as err:  # pragma: no cover - the message is the failure
        pytest.fail(f"the fix for {tool}.{field} does not validate: {err.message}")
