"""`fleetmem token revoke` states when the token stops working: locally at once (no cache), on
AWS within the stage's authorizer cache TTL (tests/stack/test_stack_hostile.py checks that bound
on the stack, where the front caches authorizer answers as API Gateway does)."""

from __future__ import annotations

from tests.cli.conftest import Fleetmem


def test_a_local_revoke_is_refused_from_the_next_request(fm: Fleetmem) -> None:
    fm("token", "create", "--client", "agent-a", "--scopes", "read", "--json")
    token_id = fm("token", "list", "--json").json()["tokens"][0]["token_id"]
    run = fm("token", "revoke", token_id, "--json")
    assert run.code == 0, run.stderr
    assert run.json() == {"token_id": token_id, "revoked": True, "refused_within_s": 0}
