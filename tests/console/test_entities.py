"""The console's entity screen in the browser: the card, facts newest first, open threads, the
neighbourhood graph of links and backlinks (and the same as a list), not-found, stored markup,
tenants apart."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.conftest import Console, follow, shot
from tests.console.test_overview import v1
from tests.console.test_pages import XSS, dialogs
from tests.console.test_sign_in import sign_in

ADA = "people/cw2e-ada"
CORP = "companies/cw2e-corp"
PROJ = "projects/cw2e-proj"
EVIL = "people/cw2e-evil"


@pytest.fixture(scope="module")
def seeded(serve_console: Console) -> dict[str, Any]:
    w = serve_console.write

    def put(slug: str, content: str, **extra: Any) -> None:
        v1(serve_console, w, "put_page", slug=slug, content=content, **extra)

    put(CORP, "---\ntitle: Corp Cw2e\ntype: company\n---\nA company.\n")
    put(
        ADA,
        "---\ntitle: Ada Cw2e\ntype: person\naliases: [Ada]\nsummary: Ada runs payments.\n---\nAda.\n",
        links=[{"type": "works_at", "target": CORP, "context": "since 2024"}],
    )
    put(PROJ, "Project.\n", title="Proj Cw2e", links=[{"type": "led_by", "target": ADA}])
    put(EVIL, "evil\n", title=f"Evil {XSS}", links=[{"type": "related", "target": ADA, "context": f"c {XSS}"}])
    facts = [
        v1(serve_console, w, "remember", fact=text, provenance="chat", entity=ADA, kind=kind)
        for text, kind in (
            ("Ada prefers tea", "preference"),
            ("Ada will send the budget by Friday", "commitment"),
            (f"Ada said {XSS}", "fact"),
        )
    ]
    return {"console": serve_console, "facts": facts}


def test_the_entity_card_facts_threads_and_neighbourhood(page: Any, seeded: dict[str, Any]) -> None:
    console = seeded["console"]
    fired = dialogs(page)
    sign_in(page, console, console.read)
    page.goto(f"{console.base}/console/entities/{ADA}")
    assert page.get_by_role("heading", level=1).inner_text() == "Ada Cw2e"
    assert "Ada runs payments." in page.locator("main").inner_text()
    assert "Ada will send the budget by Friday" in page.locator("section", has_text="Open threads").inner_text()
    items = page.locator("ol.timeline li a")
    newest_first = [f["id"] for f in reversed(seeded["facts"])]
    assert items.count() == 3 and items.nth(0).inner_text() == f"Ada said {XSS}"  # markup shown as text
    hrefs = [items.nth(i).get_attribute("href") for i in range(3)]
    assert hrefs == [f"/console/facts/{fid}" for fid in newest_first]
    # the graph: a node per link ("out") and backlink ("in"), each a link to that entity's page
    nodes = page.locator("svg.graph a")
    targets = {nodes.nth(i).get_attribute("href") for i in range(nodes.count())}
    assert targets == {f"/console/entities/{s}" for s in (CORP, PROJ, EVIL)}
    listed = page.locator("ul.links").inner_text()
    assert f"links to {CORP}" in listed and f"linked from {PROJ}" in listed and f"c {XSS}" in listed
    shot(page, "entity")
    page.locator(f"svg.graph a[href='/console/entities/{CORP}']").focus()  # keyboard-reachable
    with page.expect_navigation(wait_until="load"):
        page.keyboard.press("Enter")
    page.wait_for_url(f"**/console/entities/{CORP}")
    assert page.get_by_role("heading", level=1).inner_text() == "Corp Cw2e"
    page.goto(f"{console.base}/console/entities/{EVIL}")
    assert page.get_by_role("heading", level=1).inner_text() == f"Evil {XSS}"
    assert page.locator("main img, main script").count() == 0
    assert fired == []


def test_an_unknown_entity_is_a_not_found_page_with_a_search(page: Any, seeded: dict[str, Any]) -> None:
    console = seeded["console"]
    sign_in(page, console, console.read)
    response = page.goto(f"{console.base}/console/entities/people/cw2e-nobody")
    assert response is not None and response.status == 404
    assert page.get_by_label("Search the pages").input_value() == "people/cw2e-nobody"
    shot(page, "entity-not-found")


def test_another_tenant_never_sees_the_entity(page: Any, seeded: dict[str, Any]) -> None:
    console = seeded["console"]
    sign_in(page, console, console.other_admin)
    response = page.goto(f"{console.base}/console/entities/{ADA}")
    assert response is not None and response.status == 404
    assert "Ada runs payments" not in page.content()


def test_the_entity_index_counts_facts_sorts_and_filters_by_type(page: Any, serve_console: Console) -> None:
    w = serve_console.write
    for slug, title in (
        ("teams/cwidx-alpha", "Alpha Team"),
        ("teams/cwidx-beta", "Beta Team"),
        ("teams/cwidx-gamma", "Gamma Team"),
    ):
        v1(serve_console, w, "put_page", slug=slug, content=f"---\ntitle: {title}\ntype: cwidx-team\n---\nA team.\n")
    v1(serve_console, w, "put_page", slug="teams/cwidx-other", content="---\ntitle: Other\ntype: cwidx-club\n---\nx\n")
    for n in range(3):
        v1(
            serve_console,
            w,
            "remember",
            fact=f"Beta Team ships release {n}",
            provenance="idx",
            entity="teams/cwidx-beta",
        )
    # Alpha changes last: its newest fact is the latest change of the three
    v1(serve_console, w, "remember", fact="Alpha Team moved to floor 2", provenance="idx", entity="teams/cwidx-alpha")
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/")
    follow(page, page.get_by_role("link", name="Entities", exact=True))
    page.get_by_label("Type").fill("cwidx-team")
    follow(page, page.get_by_role("button", name="Filter"))

    def rows() -> list[list[str]]:
        return [r.split("\t") for r in page.locator("tbody tr").all_inner_texts()]

    assert [r[0] for r in rows()] == ["Alpha Team", "Beta Team", "Gamma Team"]  # by name; the club is not listed
    assert [r[3] for r in rows()] == ["1", "3", "0"]
    follow(page, page.get_by_role("link", name="facts", exact=True))
    assert [r[0] for r in rows()] == ["Beta Team", "Alpha Team", "Gamma Team"]
    follow(page, page.get_by_role("link", name="changed", exact=True))
    assert rows()[0][0] == "Alpha Team" and "type=cwidx-team" in page.url
    shot(page, "entities")
    follow(page, page.get_by_role("link", name="Beta Team"))
    assert page.get_by_role("heading", level=1).inner_text() == "Beta Team"
