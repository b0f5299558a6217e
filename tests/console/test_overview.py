"""The console's overview in the browser: counts by state, pages, the writes-per-day chart, the busiest
entities, each tenant seeing only its own memory."""

from __future__ import annotations

from typing import Any

import httpx

from tests.console.conftest import Console, shot
from tests.console.test_sign_in import sign_in


def v1(console: Console, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    r = httpx.post(
        f"{console.base}/v1/{tool}", json=arguments, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert r.status_code == 200, r.text
    return r.json()


def tile(page: Any, label: str) -> int:
    text = page.locator(".tile", has_text=label).first.locator(".n").inner_text()
    return int(text)


def test_the_overview_counts_what_the_tenant_holds_and_nothing_of_another(page: Any, serve_console: Console) -> None:
    other = page.context.browser.new_context().new_page()
    try:
        sign_in(page, serve_console, serve_console.admin)
        sign_in(other, serve_console, serve_console.other_admin)
        before_active, before_forgotten = tile(page, "active facts"), tile(page, "forgotten")
        others_before = tile(other, "active facts"), tile(other, "forgotten")
        v1(
            serve_console,
            serve_console.write,
            "remember",
            fact="Ovid prefers green tea",
            provenance="chat",
            entity="people/ovid-overview",
        )
        gone = v1(
            serve_console,
            serve_console.write,
            "remember",
            fact="Ovid's old desk is 4B",
            provenance="chat",
            entity="people/ovid-overview",
        )
        v1(serve_console, serve_console.write, "forget", id=gone["id"], reason="moved")
        page.reload()
        assert tile(page, "active facts") == before_active + 1
        assert tile(page, "forgotten") == before_forgotten + 1
        # the busiest entities memory_stats answers, each a link (other tests' entities share the tenant)
        busiest = v1(serve_console, serve_console.admin, "memory_stats")["busiest_entities"]
        assert busiest and all(page.get_by_role("link", name=e["entity_slug"]).count() == 1 for e in busiest)
        chart = page.locator("svg.chart")
        assert chart.get_attribute("role") == "img" and chart.locator("rect").count() == 30  # one bar per day
        shot(page, "overview")

        # the other tenant's overview neither counts acme's facts nor names its entities
        other.reload()
        assert (tile(other, "active facts"), tile(other, "forgotten")) == others_before
        assert other.get_by_role("link", name="people/ovid-overview").count() == 0
    finally:
        other.context.close()


def test_a_read_token_sees_the_overview_but_no_admin_screen(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    assert page.get_by_role("heading", name="Overview").count() == 1
    assert page.get_by_role("link", name="Tokens").count() == 0
    page.goto(f"{serve_console.base}/console/tokens")
    assert "admin scope" in page.get_by_role("alert").inner_text()
