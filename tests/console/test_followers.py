"""The console's followers screen: each delta session, the most recently woken first, pending counts
shown as "N+" when the server stopped counting at its cap; in the browser against a real server, and
in process over a client that answers list_followers as CONSOLE-SPEC.md shapes it."""

from __future__ import annotations

import re
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from fleetmem.web import Console as ConsoleApp
from fleetmem.web.client import ToolFailed
from tests.console.conftest import Console, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in

ROWS = [
    {
        "client_id": "agent-old",
        "session_id": "s-old",
        "since": "2026-01-01T00:00:00Z",
        "position": "people/a",
        "last_wake": "2026-01-02T00:00:00Z",
        "expires_at": "2026-01-09T00:00:00Z",
        "pending_pages": 2,
        "pending_facts": 5,
        "pending_capped": False,
    },
    {
        "client_id": "agent-new",
        "session_id": "s-new",
        "since": "2026-01-01T00:00:00Z",
        "position": "",
        "last_wake": "2026-01-05T00:00:00Z",
        "expires_at": "2026-01-12T00:00:00Z",
        "pending_pages": 3,
        "pending_facts": 1000,
        "pending_capped": True,
    },
]


class Stub:
    """A tool client answering whoami and list_followers (and refusing with `refuse` when set)."""

    label = "a stub"

    def __init__(self, refuse: ToolFailed | None = None) -> None:
        self.refuse = refuse

    async def call(self, token: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        if tool == "whoami":
            return {"tenant": "acme", "client_id": "c", "scopes": ["read"], "remote": True, "surface": "full"}
        if self.refuse is not None:
            raise self.refuse
        assert tool == "list_followers"
        return {"followers": ROWS, "protocol_version": 1}


def _signed_in(stub: Stub) -> TestClient:
    app = Starlette(routes=[Mount("/console", app=ConsoleApp(stub, root="/console").app())])  # type: ignore[arg-type]
    client = TestClient(app, base_url="http://testserver")
    form = client.get("/console/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert nonce
    r = client.post("/console/login", data={"csrf": nonce.group(1), "token": "t"}, follow_redirects=False)
    assert r.status_code == 303
    return client


def test_followers_are_sorted_by_last_wake_with_capped_counts() -> None:
    html = _signed_in(Stub()).get("/console/followers").text
    assert html.index("agent-new") < html.index("agent-old")
    assert "<td>1000+</td>" in html and "<td>3</td>" in html and "<td>5</td>" in html and "(start)" in html


def test_a_refusal_shows_the_servers_message() -> None:
    refused = ToolFailed("unknown_tool", "No tool list_followers here.", "Upgrade the server.", status=404)
    r = _signed_in(Stub(refused)).get("/console/followers")
    assert r.status_code == 404 and "No tool list_followers here." in r.text and "Upgrade the server." in r.text


def test_a_delta_session_shows_up_as_a_follower(page: Any, serve_console: Console) -> None:
    tools = httpx.get(
        f"{serve_console.base}/v1/tools", headers={"Authorization": f"Bearer {serve_console.read}"}, timeout=30
    ).json()["tools"]
    assert "list_followers" in {t["name"] for t in tools}  # the screen's tool is served
    v1(serve_console, serve_console.read, "delta", session_id="cw2-follower")
    v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Fern joined the follower test",
        provenance="chat",
        entity="people/cw2f-fern",
    )
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/followers")
    row = page.locator("tbody tr", has_text="cw2-follower")
    assert row.count() == 1 and "console-read" in row.inner_text()
    shot(page, "followers")
    other = page.context.browser.new_context().new_page()
    try:
        sign_in(other, serve_console, serve_console.other_admin)
        other.goto(f"{serve_console.base}/console/followers")
        assert "cw2-follower" not in other.locator("main").inner_text()
    finally:
        other.context.close()
