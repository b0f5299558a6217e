"""Reference 0.60 writes, replacement and withdrawal (docs/protocol.md D23) on both adapter sets:
SQLite, and DynamoDB Local + the OpenSearch node (tests/unit/domain/delta_backends.py). Nothing is
mocked; the embedder is the deterministic HashEmbedder (no model is needed for stored vectors).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.verbs import forget, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext
from fleetmem.transport.dispatch import dispatch

CTX = CallContext("ref060-replaces")


def _caller(d: Any, client: str = "agent-a", *, remote: bool = True) -> Caller:
    return Caller(tenant=d.test_tenant, client_id=client, scopes=frozenset({"read", "write"}), remote=remote)


def save(d: Any, caller: Caller, **args: Any) -> dict[str, Any]:
    return remember.run(d, caller, remember.RememberParams.model_validate({"provenance": "p", **args}), CTX).body


def refused(fn: Any, *a: Any, **args: Any) -> VerbError:
    with pytest.raises(VerbError) as err:
        fn(*a, **args)
    return err.value


def drop(d: Any, caller: Caller, **args: Any) -> dict[str, Any]:
    return forget.run(d, caller, forget.ForgetParams.model_validate(args), CTX).body


def test_replaces_supersedes_the_named_fact_and_says_so(bdeps):
    c = _caller(bdeps)
    old = save(bdeps, c, fact="The launch is on 2027-01-10", entity="projects/apollo")
    new = save(bdeps, c, fact="The launch moved to 2027-02-01", entity="projects/apollo", replaces=old["id"])
    assert new["status"] == "superseded"
    assert new["superseded_fact_id"] == old["id"]
    assert new["replaced_by_caller"] is True


def test_supersedes_and_replaces_naming_different_facts_is_invalid_params(bdeps):
    c = _caller(bdeps)
    a = save(bdeps, c, fact="Alpha is blue", entity="x")
    b = save(bdeps, c, fact="Alpha is green", entity="x")
    err = refused(save, bdeps, c, fact="Alpha is red", entity="x", replaces=a["id"], supersedes=b["id"])
    assert err.code == "invalid_params"


def test_inactive_or_mismatched_targets_are_refused_with_the_reference_codes(bdeps):
    c = _caller(bdeps)
    gone = save(bdeps, c, fact="Bob works in Paris", entity="people/bob")
    drop(bdeps, c, id=gone["id"])
    err = refused(save, bdeps, c, fact="Bob works in Rome", entity="people/bob", replaces=gone["id"])
    assert (err.code, err.message.split(":")[0]) == ("invalid_params", "target_withdrawn")

    first = save(bdeps, c, fact="Carol's budget is 10k", entity="people/carol")
    second = save(bdeps, c, fact="Carol's budget is 12k", entity="people/carol", replaces=first["id"])
    err = refused(save, bdeps, c, fact="Carol's budget is 15k", entity="people/carol", replaces=first["id"])
    assert err.message.startswith("target_superseded") and second["id"] in err.message
    assert err.fix is not None and err.fix.amend == {"replaces": second["id"]}

    other = save(bdeps, c, fact="Dan likes tea", entity="people/dan")
    err = refused(save, bdeps, c, fact="Dan likes coffee", entity="people/erin", replaces=other["id"])
    assert err.message.startswith("replaces_entity_mismatch")
    assert err.fix is not None and err.fix.amend == {"entity": "people/dan"}


def test_identical_text_is_a_duplicate_and_writes_nothing(bdeps):
    c = _caller(bdeps)
    old = save(bdeps, c, fact="Fay owns the budget", entity="people/fay")
    args = {"fact": "Fay owns the budget", "provenance": "p", "entity": "people/fay", "replaces": old["id"]}
    again = dispatch("remember", args, c, bdeps).body  # through the edge's parameter check (D3)
    assert (again["status"], again["id"]) == ("duplicate", old["id"])
    assert "superseded_fact_id" not in again


def test_an_unlinked_target_may_be_replaced_by_a_linked_fact(bdeps):
    c = _caller(bdeps)
    loose = save(bdeps, c, fact="Gus prefers mornings")
    linked = save(bdeps, c, fact="Gus prefers early mornings", entity="people/gus", replaces=loose["id"])
    assert (linked["status"], linked["superseded_fact_id"]) == ("superseded", loose["id"])


def test_an_entity_linked_copy_links_the_unattributed_one(bdeps):
    c = _caller(bdeps)
    loose = save(bdeps, c, fact="Hana leads the data team")
    linked = save(bdeps, c, fact="Hana leads the data team", entity="people/hana")
    assert linked["status"] == "superseded"
    assert linked["superseded_fact_id"] == loose["id"]
    assert "replaced_by_caller" not in linked
    assert "nothing to forget" in linked["status_text"]
    assert bdeps.facts.get(c.tenant, loose["id"]).superseded_by == linked["id"]


def test_a_forgotten_claim_is_refused_for_its_entity_until_restored(bdeps):
    c = _caller(bdeps)
    saved = save(bdeps, c, fact="Ivan is on leave", entity="people/ivan")
    drop(bdeps, c, id=saved["id"])
    err = refused(save, bdeps, c, fact="ivan is  ON leave", entity="people/ivan")
    assert (err.code, err.message.split(":")[0]) == ("invalid_params", "fact_withdrawn")
    assert err.detail["withdrawn_fact_id"] == saved["id"]
    assert err.fix is not None and err.fix.mcp["arguments"]["restore_withdrawn"] is True
    # another entity is not withdrawn
    assert save(bdeps, c, fact="Ivan is on leave", entity="people/ivan-2")["status"] == "inserted"
    back = save(bdeps, c, **err.fix.mcp["arguments"])
    assert back["status"] == "inserted"
    assert (
        bdeps.facts.withdrawals(c.tenant, _claim("Ivan is on leave"), entity_slug="people/ivan", visibility="world")
        == []
    )


def test_a_claim_forgotten_without_an_entity_is_withdrawn_for_every_entity(bdeps):
    c = _caller(bdeps)
    saved = save(bdeps, c, fact="The office closes at noon")
    drop(bdeps, c, id=saved["id"])
    for entity in (None, "places/office"):
        err = refused(save, bdeps, c, fact="The office closes at noon", **({"entity": entity} if entity else {}))
        assert err.message.startswith("fact_withdrawn")


def test_superseded_and_expired_facts_do_not_withdraw(bdeps):
    c = _caller(bdeps)
    old = save(bdeps, c, fact="Jo's desk is 4B", entity="people/jo")
    save(bdeps, c, fact="Jo's desk is 5C", entity="people/jo", replaces=old["id"])
    assert save(bdeps, c, fact="Kim is in Oslo", entity="people/kim", ttl="2000-01-01")["status"] == "inserted"
    assert (
        bdeps.facts.withdrawals(c.tenant, _claim("Jo's desk is 4B"), entity_slug="people/jo", visibility="world") == []
    )


def test_forgetting_an_unattributed_claim_that_is_linked_elsewhere_is_refused(bdeps):
    c = _caller(bdeps)
    linked = save(bdeps, c, fact="Lee signed the contract", entity="people/lee")
    # an unattributed copy saved after the linked one is a separate fact (no auto-link that way round)
    loose = save(bdeps, c, fact="Lee signed the contract")
    err = refused(drop, bdeps, c, id=loose["id"])
    assert err.message.startswith("claim_linked:") and linked["id"] in err.message
    assert bdeps.facts.get(c.tenant, loose["id"]).is_active(bdeps.clock.now())


def test_forget_lists_similar_active_facts_of_the_same_entity(bdeps):
    c = _caller(bdeps)
    gone = save(bdeps, c, fact="Mia moved to the Berlin office", entity="people/mia")
    near = save(bdeps, c, fact="Mia moved to the Berlin office in May", entity="people/mia")
    save(bdeps, c, fact="Mia plays chess", entity="people/mia")
    save(bdeps, c, fact="Mia moved to the Berlin office", entity="people/other")
    body = drop(bdeps, c, id=gone["id"])
    similar = body["similar_active"]
    assert similar["state"] == "checked" and similar["semantic_review"] == "off"
    assert [x["fact_id"] for x in similar["candidates"]] == [near["id"]]
    assert similar["candidates"][0]["similarity"] >= 0.8
    forget.ForgetResult.model_validate(body)


def test_forget_without_stored_vectors_says_not_checked(bdeps):
    d = dataclasses.replace(bdeps, embedder=None)
    c = _caller(bdeps)
    saved = save(d, c, fact="Ned likes jazz", entity="people/ned")
    assert drop(d, c, id=saved["id"])["similar_active"]["state"] == "not_checked_no_embedding"


def _claim(text: str) -> str:
    from fleetmem.memory.fact_dedup import claim_key

    return claim_key(text)
