"""Who wrote what, in the browser against a real `fleetmem serve`: the activity of each client after
two clients write, the client filter of Memories, and a token's "last used" after a call."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.console.conftest import Console, follow, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in


def _entity() -> str:
    return f"projects/act-{uuid.uuid4().hex[:8]}"


def _rows(page: Any) -> list[str]:
    return page.locator("table.activity tbody tr").all_inner_texts()


def test_the_activity_of_each_client_after_two_clients_write(page: Any, serve_console: Console) -> None:
    entity = _entity()
    first = v1(
        serve_console, serve_console.write, "remember", fact="The kickoff is on Monday", entity=entity, provenance="t"
    )
    v1(serve_console, serve_console.admin, "remember", fact="The budget is 40k", entity=entity, provenance="t")
    v1(
        serve_console,
        serve_console.admin,
        "remember",
        fact="The kickoff moved to Tuesday",
        entity=entity,
        provenance="t",
        replaces=first["id"],
    )
    sign_in(page, serve_console, serve_console.read)  # a read token sees the activity
    follow(page, page.get_by_role("navigation", name="Screens").get_by_role("link", name="Activity"))
    page.get_by_label("Entity").fill(entity)
    follow(page, page.get_by_role("button", name="Filter"))
    rows = _rows(page)
    assert len(rows) == 4, rows
    assert any("console-write" in r and "wrote" in r and "The kickoff is on Monday" in r for r in rows)
    assert any("console-admin" in r and "superseded" in r and "The kickoff is on Monday" in r for r in rows)
    assert "console-write" in rows[-1]  # newest first: the first write is the oldest row
    assert page.locator("svg.chart").count() == 1
    by_client = page.locator("table", has_text="By client").locator("tbody tr").all_inner_texts()
    assert sorted(r.split()[0] for r in by_client) == ["console-admin", "console-write"]
    shot(page, "activity")
    follow(page, page.locator("table.activity").get_by_role("link", name="console-write").first)
    assert page.get_by_label("Client").input_value() == "console-write"
    page.get_by_label("Entity").fill(entity)
    follow(page, page.get_by_role("button", name="Filter"))
    rows = _rows(page)
    assert len(rows) == 1 and "The kickoff is on Monday" in rows[0] and "console-admin" not in rows[0]


def test_another_tenants_activity_never_shows(page: Any, serve_console: Console) -> None:
    entity = _entity()
    v1(serve_console, serve_console.other_admin, "remember", fact="Other tenant's plan", entity=entity, provenance="t")
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/activity?client=console-other")
    assert _rows(page) == ["No event matches."]
    page.goto(f"{serve_console.base}/console/activity?entity={entity}")
    assert "Other tenant's plan" not in page.content()


def test_memories_filters_by_client(page: Any, serve_console: Console) -> None:
    entity = _entity()
    v1(serve_console, serve_console.write, "remember", fact="Written by the writer", entity=entity, provenance="t")
    v1(serve_console, serve_console.admin, "remember", fact="Written by the admin", entity=entity, provenance="t")
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?entity={entity}")
    table = page.locator("table.facts tbody")
    assert "Written by the writer" in table.inner_text() and "Written by the admin" in table.inner_text()
    page.get_by_label("Client").fill("console-admin")
    follow(page, page.get_by_role("button", name="Filter"))
    assert "Written by the admin" in table.inner_text()
    assert "Written by the writer" not in table.inner_text()


def test_a_tokens_last_use_and_its_clients_last_call_are_shown(page: Any, serve_console: Console) -> None:
    client = f"probe-{uuid.uuid4().hex[:6]}"
    made = v1(serve_console, serve_console.admin, "create_token", client=client, scopes=["read"])
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/tokens")
    row = page.locator("tr", has=page.locator(f"code:text-is('{made['token_id']}')"))
    assert "not yet" in row.inner_text()
    v1(serve_console, made["token"], "whoami")
    # the server records a use on a background thread (its token check runs on the event loop):
    # reload until the write has landed, a bounded number of times
    for _ in range(100):
        page.reload()
        if "not yet" not in row.inner_text():
            break
        time.sleep(0.05)
    assert "not yet" not in row.inner_text()
    assert row.locator("time").count() == 2  # created, and last used
    clients = page.locator("table.clients tbody tr", has_text=client)
    assert clients.locator("time").count() == 1  # the client's last call
    shot(page, "tokens-last-used")
    follow(page, clients.get_by_role("link", name=f"What {client} did"))
    assert page.get_by_label("Client").input_value() == client
