"""What a remote writer may not do — through the one `dispatch`, on the local SQLite stores and on
the AWS stores (DynamoDB Local for the tables, the run's OpenSearch node for the index), all on
127.0.0.1. Nothing is mocked; the embedder is the deterministic HashEmbedder.

- A remote put_page never replaces a page it cannot see: over a private page it is refused
  (`slug_taken`) and the page stays private with its text — also when the page is made private
  between the write's read and its write. Naming a time in expected_updated_at over a private page
  answers exactly as over a missing one; another brain's slug is simply free.
- list_facts' entity filter resolves a name exactly as recall's does.
- An entity name that is a path is refused by remember (nothing written) and by the reads.
- remember refuses a fact, provenance or ttl of invisible characters only, writing nothing; an
  empty ttl still means never expires, as the protocol says.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
VAULT = "projects/vault"
SECRET = "The vault code is 4711-alpha."
PRIVATE_PAGE = f"---\ntitle: Vault Room\nvisibility: private\n---\n{SECRET}\n"


@pytest.fixture
def tenant() -> str:
    return "t-" + uuid.uuid4().hex[:10]


def remote(tenant: str) -> Caller:
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def owner(tenant: str) -> Caller:
    """The brain owner's trusted local CLI."""
    return Caller(tenant=tenant, client_id="local", scopes=frozenset({"read", "write", "admin"}), remote=False)


def call(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    deps.clock.advance(seconds=1)  # type: ignore[attr-defined]  # every write gets its own updated_at
    result = dispatch(tool, arguments, caller, deps, transport="mcp")
    return bool(result.is_error), dict(result.body)


def ok(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    is_error, body = call(deps, caller, tool, arguments)
    assert not is_error, body
    return body


def stored_vault(deps: Deps, tenant: str) -> dict[str, Any]:
    return ok(deps, owner(tenant), "get_page", {"slug": VAULT})


# ----------------------------------------------------------------------------- put_page, remote


def test_a_remote_put_page_never_replaces_a_page_it_cannot_see(brain, tenant):
    agent = remote(tenant)
    ok(brain, owner(tenant), "put_page", {"slug": VAULT, "content": PRIVATE_PAGE})
    stored_at = stored_vault(brain, tenant)["updated_at"]

    # unconditional, and as a new page ("" = must not exist yet, the console's New page): refused
    for expected in ({}, {"expected_updated_at": ""}):
        is_error, body = call(brain, agent, "put_page", {"slug": VAULT, "content": "Open to all.", **expected})
        assert is_error and body["code"] == "invalid_params", (expected, body)
        assert body["detail"] == {"field": "slug", "reason": "slug_taken"}
        assert "4711" not in str(body) and "Vault Room" not in str(body) and stored_at not in str(body)

    # naming a time: exactly the answer a missing page gets
    over_private = call(brain, agent, "put_page", {"slug": VAULT, "content": "Open.", "expected_updated_at": stored_at})
    over_missing = call(
        brain,
        agent,
        "put_page",
        {"slug": "projects/nothing-here", "content": "Open.", "expected_updated_at": stored_at},
    )
    assert over_private[0] and over_missing[0]
    assert (
        over_private[1]["detail"]
        == over_missing[1]["detail"]
        == {
            "field": "expected_updated_at",
            "reason": "stale_version",
            "stored_updated_at": None,
        }
    )
    assert over_private[1]["message"].replace(VAULT, "S") == over_missing[1]["message"].replace(
        "projects/nothing-here", "S"
    )

    page = stored_vault(brain, tenant)
    assert page["visibility"] == "private" and SECRET in page["content"] and page["updated_at"] == stored_at
    assert call(brain, agent, "get_page", {"slug": VAULT})[1]["code"] == "not_found"

    # a world page is still the remote writer's to update, without expected_updated_at
    ok(brain, owner(tenant), "put_page", {"slug": "projects/lobby", "content": "# Lobby\nFirst."})
    updated = ok(brain, agent, "put_page", {"slug": "projects/lobby", "content": "# Lobby\nSecond."})
    assert updated["status"] == "updated"

    # another brain's slugs are free: its private and world pages are neither seen nor touched
    other = "u-" + uuid.uuid4().hex[:10]
    ok(brain, owner(other), "put_page", {"slug": "projects/atrium", "content": PRIVATE_PAGE})
    ok(brain, owner(other), "put_page", {"slug": "projects/annex", "content": "# Annex\nWorld page of another brain."})
    assert ok(brain, agent, "put_page", {"slug": "projects/atrium", "content": "Mine."})["status"] == "created"
    assert (
        ok(brain, agent, "put_page", {"slug": "projects/annex", "content": "Mine too.", "expected_updated_at": ""})[
            "status"
        ]
        == "created"
    )
    assert SECRET in ok(brain, owner(other), "get_page", {"slug": "projects/atrium"})["content"]
    assert "another brain" in ok(brain, owner(other), "get_page", {"slug": "projects/annex"})["content"]


class _TurnsPrivate:
    """The brain's own page store; right after the remote writer's first read of the page, the
    owner rewrites it as private (the read-then-write window of an unconditional put_page)."""

    def __init__(self, deps: Deps, tenant: str) -> None:
        self._pages = deps.pages
        self._deps = deps
        self._tenant = tenant
        self.turned = False

    def get(self, tenant: str, slug: str) -> Any:
        page = self._pages.get(tenant, slug)
        if not self.turned and slug == VAULT:
            self.turned = True
            ok(self._deps, owner(self._tenant), "put_page", {"slug": VAULT, "content": PRIVATE_PAGE})
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pages, name)


def test_a_page_made_private_between_the_read_and_the_write_is_not_overwritten(brain, tenant):
    ok(brain, owner(tenant), "put_page", {"slug": VAULT, "content": "# Vault Room\nNothing secret yet."})
    racing = _TurnsPrivate(brain, tenant)
    raced = dataclasses.replace(brain, pages=racing)

    is_error, body = call(raced, remote(tenant), "put_page", {"slug": VAULT, "content": "Open to all."})

    assert racing.turned
    assert is_error and body["detail"] == {"field": "slug", "reason": "slug_taken"}
    page = stored_vault(brain, tenant)
    assert page["visibility"] == "private" and SECRET in page["content"]


# ----------------------------------------------------------------------------- one entity resolver


def test_list_facts_resolves_an_entity_name_as_recall_does(brain, tenant):
    agent = remote(tenant)
    ok(brain, agent, "put_page", {"slug": "projects/atlas", "content": "---\ntitle: Atlas\n---\nThe Atlas project."})
    saved = ok(brain, agent, "remember", {"fact": "Atlas ships in March", "provenance": "standup", "entity": "Atlas"})
    assert saved["entity_slug"] == "projects/atlas"

    recalled = [f["fact_id"] for f in ok(brain, agent, "recall", {"entity": "Atlas"})["facts"]]
    listed = [f["fact_id"] for f in ok(brain, agent, "list_facts", {"entity": "Atlas"})["facts"]]
    by_slug = [f["fact_id"] for f in ok(brain, agent, "list_facts", {"entity": "projects/atlas"})["facts"]]

    assert recalled == listed == by_slug == [saved["id"]]


# ----------------------------------------------------------------------------- entity names that are paths


def nothing_written(deps: Deps, tenant: str) -> bool:
    return ok(deps, owner(tenant), "list_facts", {"state": "any"})["facts"] == []


@pytest.mark.parametrize("entity", ["../../etc/passwd", "people/../../x", "..\\..\\windows"])
def test_a_path_as_the_entity_is_refused_on_remember_and_on_the_reads(brain, tenant, entity):
    is_error, body = call(
        brain, remote(tenant), "remember", {"fact": "Root owns it", "provenance": "chat", "entity": entity}
    )
    assert is_error and body["code"] == "invalid_params"
    assert body["detail"]["reason"] == "path_slug" and body["detail"]["field"] == "entity"
    assert "path" in body["message"] and body["fix"]["next"] == "report"
    assert nothing_written(brain, tenant)
    reads = (("recall", {"entity": entity}), ("list_facts", {"entity": entity}), ("entity", {"name": entity}))
    for tool, args in reads:
        is_error, body = call(brain, remote(tenant), tool, args)
        assert is_error and body["detail"]["reason"] == "path_slug", (tool, body)


# ----------------------------------------------------------------------------- remember validation

INVISIBLE = [
    "\u200b",
    "\u200b\u200c",
    "\u200d",
    "\ufeff",
    "\u2060\u200e",
    " \u200b\u00a0\u3000 ",
    "\u180e",
    "\u3164",
    "\ufe0f",
]


@pytest.mark.parametrize("text", INVISIBLE, ids=[t.encode("unicode_escape").decode() for t in INVISIBLE])
def test_a_fact_or_provenance_with_no_visible_character_is_refused(brain, tenant, text):
    is_error, body = call(brain, remote(tenant), "remember", {"fact": text, "provenance": "chat"})
    assert is_error and body["code"] == "invalid_params" and "fact is empty" in body["message"]

    is_error, body = call(brain, remote(tenant), "remember", {"fact": "Ada likes tea", "provenance": text})
    assert is_error and body["code"] == "provenance_required"
    assert text not in ((body.get("fix") or {}).get("mcp") or {}).get("arguments", {}).get("provenance", "")
    assert nothing_written(brain, tenant)


@pytest.mark.parametrize("ttl", ["\u200b", "\u200b\u200c", "\ufeff"])
def test_a_ttl_of_invisible_characters_is_refused_not_read_as_never_expires(brain, tenant, ttl):
    arguments = {"fact": "Ada likes tea", "provenance": "chat", "ttl": ttl}
    is_error, body = call(brain, remote(tenant), "remember", arguments)
    assert is_error and body["code"] == "invalid_params" and body["message"].startswith("ttl holds only invisible")
    assert "Leave ttl out" in body["message"] and body["fix"]["next"] == "report"
    assert nothing_written(brain, tenant)


@pytest.mark.parametrize("ttl", ["", "   ", None])
def test_an_empty_or_null_ttl_never_expires_as_the_protocol_says(brain, tenant, ttl):
    saved = ok(brain, remote(tenant), "remember", {"fact": "Ada likes tea", "provenance": "chat", "ttl": ttl})
    assert saved["valid_until"] is None
