"""The console's entity screen in the browser: the card, facts newest first, open threads, the
neighbourhood graph of links and backlinks (whole labels inside the drawing, and the same as a
table), not-found, stored markup, tenants apart."""

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
    listed = page.locator("table.links").inner_text()
    assert f"links to\t{CORP}" in listed and f"linked from\t{PROJ}" in listed and f"c {XSS}" in listed
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


HUB = "projects/cwn-hub"
#: Long slugs, set at every side of the hub (right, bottom, left, top): each label must show whole.
LONG = [
    f"projects/cwn-{n}-the-quarterly-planning-programme-of-the-payments-platform-team" for n in ("a", "b", "c", "d")
]
#: A backlink (a page linking to the hub) with a long slug of one unbroken run.
LONG_IN = "notes/cwn-" + "x" * 70


def svg_labels(page: Any) -> list[dict[str, Any]]:
    """Each label of the neighbourhood graph: its text, whether its drawn box lies inside the SVG's
    viewBox (and inside the SVG on screen), and the box itself."""
    return page.locator("svg.graph").evaluate(
        """svg => {
          const vb = svg.viewBox.baseVal, screen = svg.getBoundingClientRect();
          return [...svg.querySelectorAll('text')].map(t => {
            const b = t.getBBox(), r = t.getBoundingClientRect();
            return {
              text: t.textContent,
              title: t.closest('a') ? t.closest('a').querySelector('title').textContent : '',
              inside: b.x >= vb.x && b.y >= vb.y && b.x + b.width <= vb.x + vb.width
                && b.y + b.height <= vb.y + vb.height,
              on_screen: r.left >= screen.left && r.top >= screen.top && r.right <= screen.right
                && r.bottom <= screen.bottom,
              box: [b.x, b.y, b.x + b.width, b.y + b.height],
            };
          });
        }"""
    )


def test_the_neighbourhood_shows_whole_labels_inside_the_drawing_and_as_a_table(
    page: Any, serve_console: Console
) -> None:
    w = serve_console.write
    for slug in LONG:
        v1(serve_console, w, "put_page", slug=slug, content="A programme.\n", title=slug.rsplit("/", 1)[1])
    v1(
        serve_console,
        w,
        "put_page",
        slug=HUB,
        content="The hub.\n",
        title="Hub",
        links=[{"type": "depends_on", "target": slug, "context": "since Q3"} for slug in LONG],
    )
    v1(
        serve_console,
        w,
        "put_page",
        slug=LONG_IN,
        content="A note.\n",
        title="Note",
        links=[{"type": "about", "target": HUB}],
    )
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/entities/{HUB}")
    labels = svg_labels(page)
    neighbours = [label for label in labels if label["title"]]
    assert sorted(label["text"] for label in neighbours) == sorted([*LONG, LONG_IN])  # every label whole
    assert all(label["inside"] and label["on_screen"] for label in labels), labels  # none clipped
    for i, a in enumerate(labels):  # and none drawn over another
        for b in labels[i + 1 :]:
            apart = a["box"][2] <= b["box"][0] or b["box"][2] <= a["box"][0]
            assert apart or a["box"][3] <= b["box"][1] or b["box"][3] <= a["box"][1], (a, b)
    titles = {label["text"]: label["title"] for label in neighbours}
    assert titles[LONG[0]] == f"→ depends_on: {LONG[0]}" and titles[LONG_IN] == f"← about: {LONG_IN}"
    # the same neighbourhood as a table: the page's links and its backlink
    rows = [r.split("\t") for r in page.locator("table.links tbody tr").all_inner_texts()]
    assert sorted(rows) == sorted(
        [["links to", slug, "depends_on", "since Q3"] for slug in LONG] + [["linked from", LONG_IN, "about", ""]]
    )
    shot(page, "entity-neighbourhood")
    follow(page, page.locator("table.links").get_by_role("link", name=LONG_IN))
    assert page.get_by_role("heading", level=1).inner_text() == "Note"


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
