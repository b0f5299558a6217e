"""Key separators over `/mcp` on the local stack (tests/stack/stack.py): `#`, `%`, `*`, `~` and
unicode in every id field a caller sends (session_id, entity, title, alias, idempotency key) never
cross from one tenant to another; a row the old key scheme stored for a tenant `<a>#b` is not
reached by tenant `<a>` with `session_id: "b#s"`; a stored credential whose tenant breaks the id
grammar is refused as an invalid token (401)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from fleetmem.adapters.aws.dynamo import to_ddb
from fleetmem.adapters.aws.facts import fact_to_item
from fleetmem.models import ClientRecord, Fact
from fleetmem.tokens import hash_token, mint_token, token_id_for
from tests.aws import engines

from .conftest import mint, rpc
from .stack import Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

VALUES = ["b#s", "#", "%23", "*", "~chg", "x%y#z*~", "北京#办公室"]


def tool(stack: Stack, token: str, name: str, arguments: dict[str, Any]) -> httpx.Response:
    out = rpc(stack.mcp_url, token, "tools/call", {"name": name, "arguments": arguments})
    assert out.status_code == 200, out.text
    return out


def test_separators_in_every_id_field_over_mcp_do_not_cross_tenants(stack):
    a = f"keys{uuid.uuid4().hex[:6]}"
    b = f"{a}-b"
    ta, tb = mint(stack, ["read", "write"], tenant=a), mint(stack, ["read", "write"], tenant=b)
    marker = f"secretof{uuid.uuid4().hex[:8]}"
    b_ids = set()
    for n, value in enumerate(VALUES):
        wrote = tool(
            stack,
            tb,
            "remember",
            {
                "fact": f"{marker} fact number {n}",
                "provenance": "stack keys",
                "session_id": value,
                "entity": f"k{value}",
                "idempotency_key": value,
            },
        )
        assert wrote.json()["result"].get("isError") is not True, wrote.text
        b_ids.add(wrote.json()["result"]["structuredContent"]["id"])
        put = tool(
            stack,
            tb,
            "put_page",
            {
                "slug": f"projects/keys-{n}",
                "content": f"{marker} page body",
                "title": f"{value} page",
                "aliases": [value],
            },
        )
        assert put.json()["result"].get("isError") is not True, put.text
    stack.drain()

    for value in VALUES:
        # tenant b reads its own items back through the escaped keys
        assert marker in tool(stack, tb, "recall", {"session_id": value}).text
        assert f"{value} page" in tool(stack, tb, "entity", {"name": value}).text
        for probe in (value, "b#" + value, "-b#" + value):
            answers = [
                tool(stack, ta, "recall", {"session_id": probe}),
                tool(stack, ta, "recall", {"entity": probe}),
                tool(stack, ta, "recall", {"entity": f"k{probe}"}),
                tool(stack, ta, "recall", {"query": f"{marker} {probe}"}),
                tool(stack, ta, "entity", {"name": probe}),
                tool(stack, ta, "entity", {"name": f"{probe} page"}),
                tool(stack, ta, "context_pack", {"entities": probe, "session_id": probe}),
                tool(stack, ta, "delta", {"session_id": probe}),
            ]
            for answer in answers:
                assert marker not in answer.text, answer.text
    # the same idempotency keys are tenant a's own: a fresh write each, never b's replay
    for value in VALUES:
        mine = tool(
            stack,
            ta,
            "remember",
            {
                "fact": f"tenant a's own fact for {value}",
                "provenance": "stack keys",
                "idempotency_key": value,
            },
        ).json()["result"]["structuredContent"]
        assert mine["status"] == "inserted" and mine["id"] not in b_ids, mine
    assert marker not in tool(stack, ta, "list_pages", {}).text


def test_tenant_a_does_not_reach_a_row_stored_under_the_old_scheme_for_tenant_a_hash_b(stack):
    """The reproduced attack: tenant `a` called recall(session_id "b#s") and got tenant `a#b`'s fact.
    No path creates tenant `a#b` now, so its row is written into the stage's table directly, as
    the old scheme keyed it (`<tenant>#<session>`, raw)."""
    a = f"keys{uuid.uuid4().hex[:6]}"
    legacy = f"{a}#b"
    marker = f"secretof{uuid.uuid4().hex[:8]}"
    stores = engines.open_stores(stack.ddb, stack.prefix)
    fact = Fact(
        tenant=a,
        fact_id="f_legacy",
        seq=1,
        text=f"{marker} of {legacy}",
        provenance="old",
        session_id="s",
        entity_slug="s",
        client_id="c",
        created_at=datetime.now(UTC),
    )
    row = {
        **fact_to_item(fact),
        "pk": f"{legacy}#f_legacy",
        "tenant": legacy,
        "tp": legacy,
        "sess": f"{legacy}#s",
        "ent": f"{legacy}#s",
    }
    stores.facts._db.put_item(TableName=stores.facts.table, Item=to_ddb(row))
    token = mint(stack, ["read", "write"], tenant=a)
    for args in ({"session_id": "b#s"}, {"entity": "b#s"}, {"session_id": "b#s", "include_expired": True}):
        assert marker not in tool(stack, token, "recall", args).text
    assert marker not in tool(stack, token, "context_pack", {"entities": "b#s", "session_id": "b#s"}).text


def test_a_stored_credential_whose_tenant_breaks_the_id_grammar_is_an_invalid_token(stack):
    """A clients row written before the grammar was enforced (tenant `<a>#b`), made directly."""
    stores = engines.open_stores(stack.ddb, stack.prefix)
    token = mint_token()
    digest = hash_token(token)
    stores.clients.create(
        ClientRecord(
            token_hash=digest,
            token_id=token_id_for(digest),
            tenant=f"keys{uuid.uuid4().hex[:6]}#b",
            client_id="old",
            scopes=frozenset({"read", "write"}),
            created_at=datetime.now(UTC),
        )
    )
    refused = rpc(stack.mcp_url, token, "tools/list")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized", refused.text
    good = mint(stack, ["read"], tenant=f"keys{uuid.uuid4().hex[:6]}")
    assert rpc(stack.mcp_url, good, "tools/list").status_code == 200
