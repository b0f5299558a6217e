"""list_facts {conflicts: true}: the listed active facts grouped by the detection behind remember's
`probable_update` notice, on the real local stores with the hash embedder's stored vectors."""

from __future__ import annotations

from typing import Any

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

REMOTE = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)
OWNER = Caller(tenant="t1", client_id="owner", scopes=frozenset({"read", "write"}))


def remember(deps: Deps, text: str, caller: Caller = REMOTE, **extra: Any) -> Any:
    r = dispatch("remember", {"fact": text, "provenance": "t", "entity": "people/ada", **extra}, caller, deps)
    assert not r.is_error, r.body
    return r


def test_the_groups_are_the_pairs_remember_flags_as_probable_updates(deps: Deps) -> None:
    first = remember(deps, "Ada's desk is 3A").body["id"]
    second = remember(deps, "Ada's desk is 5C")
    assert [n.code for n in second.notices] == ["probable_update"]  # remember's own reading of the pair
    remember(deps, "Ada prefers tea")
    remember(deps, "Ada prefers coffee")  # no attribute before a copula: remember does not flag it either
    answer = dispatch("list_facts", {"entity": "people/ada", "conflicts": True}, REMOTE, deps).body
    assert answer["conflicts"] == [[second.body["id"], first]]
    plain = dispatch("list_facts", {"entity": "people/ada"}, REMOTE, deps).body
    assert "conflicts" not in plain and plain["facts"] == answer["facts"]


def test_a_replaced_value_is_no_longer_a_conflict_and_a_private_value_is_not_one_for_remote_callers(
    deps: Deps,
) -> None:
    old = remember(deps, "Ada's phone is 555-0100").body["id"]
    newer = remember(deps, "Ada's phone is 555-0199").body["id"]
    remember(deps, "Ada's phone is 555-0123", OWNER, visibility="private")
    asked = {"entity": "people/ada", "conflicts": True}
    assert dispatch("list_facts", asked, REMOTE, deps).body["conflicts"] == [
        [newer, old]
    ]  # the private one is not shown
    remember(deps, "Ada's phone is 555-0199", replaces=old)
    assert dispatch("list_facts", asked, REMOTE, deps).body["conflicts"] == []
