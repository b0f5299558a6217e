"""Signing in to the console with a fleetmem token, in Debian's Chromium against a real `fleetmem serve`:
the session cookie, the CSRF checks, sign-out, the strict Content-Security-Policy and the redirect
that never leaves the console."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.console.conftest import Console, follow, shot


def sign_in(page: Any, console: Console, token: str, *, next_path: str = "") -> None:
    page.goto(f"{console.base}/console/login" + (f"?next={next_path}" if next_path else ""))
    page.get_by_label("fleetmem token").fill(token)
    follow(page, page.get_by_role("button", name="Sign in"))


def test_a_token_signs_in_and_the_header_shows_who_it_is(page: Any, serve_console: Console) -> None:
    page.goto(f"{serve_console.base}/console/")
    assert page.url.startswith(f"{serve_console.base}/console/login")  # not signed in: to the form
    shot(page, "sign-in")
    sign_in(page, serve_console, serve_console.write, next_path="/console/")
    header = page.locator("header .who").inner_text()
    assert "acme" in header and "console-write" in header and "read, write" in header
    assert page.get_by_role("link", name="Tokens").count() == 0  # an admin screen: not offered
    cookie = next(c for c in page.context.cookies() if c["name"] == serve_console.cookie)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert serve_console.write not in cookie["value"]  # the browser holds a session id, not the token


def test_a_wrong_token_is_refused_with_the_fix_and_no_session(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, "fm_not-a-token")
    alert = page.get_by_role("alert").inner_text()
    assert "not accepted" in alert and "fleetmem token create" in alert
    assert page.url.endswith("/console/login")
    assert not [c for c in page.context.cookies() if c["name"] == "fleetmem_console"]
    shot(page, "sign-in-refused")


def test_an_empty_token_is_refused_before_any_call(page: Any, serve_console: Console) -> None:
    page.goto(f"{serve_console.base}/console/login")
    page.get_by_label("fleetmem token").evaluate("el => el.removeAttribute('required')")
    follow(page, page.get_by_role("button", name="Sign in"))
    assert "Enter a token" in page.get_by_role("alert").inner_text()


def test_sign_out_ends_the_session_on_the_server(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    session = next(c for c in page.context.cookies() if c["name"] == serve_console.cookie)["value"]
    follow(page, page.get_by_role("button", name="Sign out"))
    assert page.url.endswith("/console/login?done=signed-out")
    assert "signed out" in page.get_by_role("status").inner_text()
    # the old session id, replayed by another client, no longer opens anything
    r = httpx.get(f"{serve_console.base}/console/", cookies={serve_console.cookie: session}, follow_redirects=False)
    assert r.status_code == 303 and "/console/login" in r.headers["location"]


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/mcp", "/console\\@evil"])
def test_the_redirect_after_sign_in_never_leaves_the_console(page: Any, serve_console: Console, target: str) -> None:
    sign_in(page, serve_console, serve_console.read, next_path=target)
    assert page.url == f"{serve_console.base}/console/"


def test_a_sign_in_post_without_the_form_token_is_refused(serve_console: Console) -> None:
    """A forged cross-site sign-in (login CSRF) carries neither the form's value nor its cookie."""
    r = httpx.post(
        f"{serve_console.base}/console/login",
        data={"token": serve_console.admin, "csrf": "guess"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "security token" in r.text
    assert f"{serve_console.cookie}=" not in r.headers.get("set-cookie", "")


def test_a_post_from_another_origin_is_refused(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    form = page.locator("form[action='/console/logout'] input[name=csrf]").get_attribute("value")
    r = httpx.post(
        f"{serve_console.base}/console/logout",
        data={"csrf": form},
        cookies=cookies,
        headers={"Origin": "https://evil.example"},
        follow_redirects=False,
    )
    # refused by the server's DNS-rebinding guard (it checks Origin on every route) or the console's own check
    assert r.status_code == 403 and ("Origin header" in r.text or "another site" in r.text)
    page.reload()
    assert page.get_by_role("button", name="Sign out").count() == 1  # still signed in: nothing changed


def test_every_console_answer_carries_the_strict_policy(page: Any, serve_console: Console) -> None:
    for path in ("/console/login", "/console/static/console.css", "/console/"):
        r = httpx.get(f"{serve_console.base}{path}", follow_redirects=False)
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-store"
    # a script the page would try to run is refused by the browser under this policy
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text))
    page.goto(f"{serve_console.base}/console/login")
    page.evaluate("""() => { const s = document.createElement('div');
        s.innerHTML = '<img src="x" onerror="document.title=\\'owned\\'">'; document.body.append(s); }""")
    page.wait_for_timeout(200)
    assert page.title() != "owned"
    assert any("Content Security Policy" in e for e in errors)
