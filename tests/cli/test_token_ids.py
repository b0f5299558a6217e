"""Tenant and client ids follow one grammar on every path that makes a credential
(`fleetmem.tokens.ID_REGEX`): the CLI refuses a bad id with `invalid_params` and its fix before any
store is touched, `create_client` refuses it for every other caller, and the ids people use keep
working."""

from __future__ import annotations

import pytest

from fleetmem.adapters.local.clock import SystemClock
from fleetmem.tokens import create_client
from tests.cli.conftest import Fleetmem

#: Each would join another field in a key (`#`), look like a path or scheme (`/`, `:`), differ
#: only by case or dots, or carry whitespace or control characters.
HOSTILE = ["a#b", "acme#s#x", "a/b", "a:b", "Acme", "a.b", " acme", "acme ", "a\nb", "", "-acme", "x" * 64, "é"]
ACCEPTED = ["acme", "t1", "team-x", "a_b-c", "0", "x" * 63]


@pytest.mark.parametrize("tenant", HOSTILE)
def test_token_create_refuses_a_tenant_outside_the_grammar_with_a_fix(fm: Fleetmem, tenant: str) -> None:
    run = fm("token", "create", "--client", "agent-a", "--scopes", "read", f"--tenant={tenant}", "--json")
    assert run.code == 2
    doc = run.json()
    assert doc["code"] == "invalid_params" and doc["suggestion"]
    assert fm("token", "list", "--json").json()["tokens"] == []


@pytest.mark.parametrize("client", ["agent#a", "Agent", "a b", "a/b"])
def test_token_create_refuses_a_client_outside_the_grammar(fm: Fleetmem, client: str) -> None:
    run = fm("token", "create", f"--client={client}", "--scopes", "read", "--json")
    assert run.code == 2 and run.json()["code"] == "invalid_params"


@pytest.mark.parametrize("tenant", ACCEPTED)
def test_the_ids_in_use_are_accepted_unchanged(fm: Fleetmem, tenant: str) -> None:
    run = fm("token", "create", "--client", "agent-a", "--scopes", "read", f"--tenant={tenant}", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["tenant"] == tenant


@pytest.mark.parametrize("tenant", HOSTILE)
def test_create_client_refuses_the_same_ids_for_every_other_caller(tenant: str, tmp_path) -> None:
    from fleetmem.config import Settings
    from fleetmem.wiring import build_deps

    deps = build_deps(Settings(data_dir=tmp_path, embedder="none"))
    with pytest.raises(ValueError, match="tenant id"):
        create_client(deps.clients, SystemClock(), tenant=tenant, client_id="agent-a", scopes=["read"])
    assert deps.clients.list() == []
