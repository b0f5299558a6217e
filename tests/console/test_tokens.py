"""The Tokens screen (admin) in the browser against a real `fleetmem serve`: the list, creating a token
(shown once, never in a URL), revoking with a confirmation, the server's refusals kept beside what was
typed, and what a non-admin session gets."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.console.conftest import Console, follow, shot
from tests.console.test_memories import session_of
from tests.console.test_sign_in import sign_in


@pytest.fixture(scope="module")
def token_tools(serve_console: Console) -> None:
    r = httpx.get(f"{serve_console.base}/v1/tools", headers={"Authorization": f"Bearer {serve_console.admin}"})
    names = {t["name"] for t in r.json()["tools"]}
    assert {"list_tokens", "create_token", "revoke_token"} <= names, names


def test_create_shows_the_token_once_then_revoke_after_confirming(
    page: Any, serve_console: Console, token_tools: None
) -> None:
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/tokens")
    page.get_by_label("Client name").fill("console-made-bot")
    page.get_by_label("write", exact=True).check()
    page.get_by_label("Your token, to confirm").fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Create token"))
    token = page.get_by_label("Token for console-made-bot").input_value()
    assert token.startswith("fm_") and token not in page.url
    assert "shown only this once" in page.get_by_role("alert").inner_text()
    shot(page, "token-created")
    who = httpx.post(f"{serve_console.base}/v1/whoami", json={}, headers={"Authorization": f"Bearer {token}"})
    assert who.status_code == 200 and who.json()["scopes"] == ["read", "write"]

    page.goto(f"{serve_console.base}/console/tokens")
    assert token not in page.content()  # never shown again
    shot(page, "tokens")
    row = page.locator("tr", has_text="console-made-bot")
    follow(page, row.get_by_role("button"))
    assert "cannot be undone" in page.locator("main").inner_text()
    page.get_by_label("Your token, to confirm").fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Revoke for good"))
    assert "revoked" in page.get_by_role("status").inner_text()
    who = httpx.post(f"{serve_console.base}/v1/whoami", json={}, headers={"Authorization": f"Bearer {token}"})
    assert who.status_code == 401


def test_bad_input_shows_the_servers_message_and_keeps_what_was_typed(
    page: Any, serve_console: Console, token_tools: None
) -> None:
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/tokens")
    page.get_by_label("Client name").fill("")
    page.get_by_label("Your token, to confirm").fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Create token"))
    assert page.get_by_role("alert").count() == 1
    page.get_by_label("Client name").fill("no-scope-bot")
    page.get_by_label("read", exact=True).uncheck()
    page.get_by_label("Your token, to confirm").fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Create token"))
    assert page.get_by_role("alert").count() == 1
    assert page.get_by_label("Client name").input_value() == "no-scope-bot"


def test_a_write_token_gets_no_tokens_screen_and_its_posts_are_refused(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.write)
    assert page.get_by_role("link", name="Tokens").count() == 0
    response = page.goto(f"{serve_console.base}/console/tokens")
    assert response is not None and response.status == 403
    assert "admin scope" in page.get_by_role("alert").inner_text()
    cookies, csrf = session_of(page)
    posts = (("create", {"client": "sneaky", "scope": "read"}), ("revoke", {"token_id": "t", "confirm": "yes"}))
    for path, form in posts:
        r = httpx.post(
            f"{serve_console.base}/console/tokens/{path}",
            cookies=cookies,
            data={"csrf": csrf, **form},
            follow_redirects=False,
        )
        assert r.status_code == 403 and "admin scope" in r.text and "fm_" not in r.text


def test_a_forged_create_without_the_csrf_is_refused(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.admin)
    cookies, _ = session_of(page)
    for form in ({}, {"csrf": "wrong"}):
        r = httpx.post(
            f"{serve_console.base}/console/tokens/create",
            cookies=cookies,
            data={**form, "client": "forged", "scope": "admin"},
            follow_redirects=False,
        )
        assert r.status_code == 403 and "security token" in r.text and "fm_" not in r.text
