"""The browser harness itself: Debian's Chromium, driven by Playwright, reaches a real `fleetmem serve`."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.console.conftest import Console, shot


def test_browser_opens_the_served_health_document(page: Any, serve_console: Console) -> None:
    response = page.goto(f"{serve_console.base}/health")
    assert response is not None and response.status == 200
    text = page.locator("pre").first.inner_text()  # the browser shows a JSON body in a <pre>
    assert "ok" in text
    assert json.loads(text)["status"] == "ok"
    assert shot(page, "health").stat().st_size > 0


def test_the_minted_tokens_authenticate_with_their_scopes(serve_console: Console) -> None:
    def tools(token: str) -> set[str]:
        r = httpx.get(f"{serve_console.base}/v1/tools", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 200, r.text
        return {t["name"] for t in r.json()["tools"]}

    read, write, admin = tools(serve_console.read), tools(serve_console.write), tools(serve_console.admin)
    assert "recall" in read and "remember" not in read
    assert "remember" in write and "purge_fact" not in write
    assert "purge_fact" in admin and "purge_fact" in tools(serve_console.other_admin)
    bad = httpx.get(f"{serve_console.base}/v1/tools", headers={"Authorization": "Bearer fm_nope"}, timeout=30)
    assert bad.status_code == 401
