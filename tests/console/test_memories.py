"""The Memories screen in the browser against a real `fleetmem serve`: the facts table with its filters
and pages, search over recall, forgetting a selection (dry run, then confirm), and what the server keeps
from each caller (scopes, tenants, private facts, stored markup)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.console.conftest import Console, follow, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in

ENTITY = "projects/memories-screen"
XSS_TEXT = "Quokka payload <img src=x onerror=alert(1)> <script>alert(2)</script>"
XSS_PROVENANCE = "<script>alert(3)</script>"


def session_of(page: Any) -> tuple[dict[str, str], str]:
    """The page's cookies and the CSRF value its forms carry (to forge or replay a post)."""
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    return cookies, csrf or ""


def watch_dialogs(page: Any) -> list[str]:
    fired: list[str] = []
    page.on("dialog", lambda d: (fired.append(d.message), d.dismiss()))
    return fired


def state_of(console: Console, fact_id: str) -> str | None:
    facts = v1(console, console.admin, "list_facts", fact_id=fact_id)["facts"]
    return facts[0]["status"] if facts else None


@pytest.fixture(scope="module")
def seeded(serve_console: Console) -> dict[str, Any]:
    def remember(fact: str, **extra: Any) -> str:
        return str(v1(serve_console, serve_console.write, "remember", fact=fact, **extra)["id"])

    ids = [
        remember(f"Memories screen fact number {n} about wombats", provenance="memories-test", entity=ENTITY)
        for n in range(3)
    ]
    xss = remember(XSS_TEXT, provenance=XSS_PROVENANCE, entity=ENTITY)
    private = remember(
        "Quokka private detail only the owner may read", provenance="memories-test", entity=ENTITY, visibility="private"
    )
    v1(
        serve_console,
        serve_console.write,
        "put_page",
        slug="projects/quokka-habitat",
        title="Quokka habitat",
        content="Quokkas live on Rottnest Island and like shade.",
    )
    return {"ids": ids, "xss": xss, "private": private}


def test_the_table_filters_pages_with_next_and_links_each_fact(
    page: Any, serve_console: Console, seeded: dict[str, Any]
) -> None:
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories")
    page.get_by_label("Entity").fill(ENTITY)
    page.get_by_label("Provenance contains").fill("MEMORIES-test")  # case-insensitive substring
    page.get_by_label("Per page").select_option("25")
    follow(page, page.get_by_role("button", name="Filter"))
    rows = page.locator("table.facts tbody tr")
    assert rows.count() == 3  # the three world facts; the private one is never listed to a remote caller
    assert "wombats" in rows.first.inner_text()
    shot(page, "memories")

    # two per page: Next keeps the filters and goes on where the first page stopped
    page.goto(f"{serve_console.base}/console/memories?entity={quote(ENTITY)}&provenance=memories-test&limit=2")
    first = page.locator("table.facts tbody tr").all_inner_texts()
    assert len(first) == 2
    follow(page, page.get_by_role("link", name="Next"))
    assert "entity=projects%2Fmemories-screen" in page.url and "provenance=memories-test" in page.url
    second = page.locator("table.facts tbody tr").all_inner_texts()
    assert len(second) == 1 and second[0] not in first
    assert page.get_by_role("link", name="Next").count() == 0
    assert page.get_by_label("Entity").input_value() == ENTITY  # the form shows the filters in force

    # each row opens the fact's detail
    follow(page, page.locator("table.facts tbody tr a").first)
    assert "/console/facts/" in page.url and page.get_by_role("heading", name="Fact").count() == 1


def test_the_state_filter_lists_forgotten_facts(page: Any, serve_console: Console) -> None:
    gone = v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Memories screen stale desk note",
        provenance="memories-state",
        entity="projects/memories-state",
    )["id"]
    v1(serve_console, serve_console.write, "forget", id=gone, reason="stale")
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?entity=projects/memories-state")
    assert "No fact matches" in page.locator("table.facts").inner_text()
    page.get_by_label("State").select_option("forgotten")
    follow(page, page.get_by_role("button", name="Filter"))
    assert "stale desk note" in page.locator("table.facts").inner_text()
    assert "forgotten" in page.locator("table.facts tbody tr").first.inner_text()


def test_a_bad_date_shows_the_servers_message_and_keeps_the_filters(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories")
    page.get_by_label("Entity").fill(ENTITY)
    page.get_by_label("Created after").fill("last tuesday-ish")
    follow(page, page.get_by_role("button", name="Filter"))
    alert = page.get_by_role("alert")
    assert "created_after" in alert.inner_text() and "Not accepted." in alert.inner_text()
    assert page.get_by_label("Created after").input_value() == "last tuesday-ish"
    assert page.get_by_label("Entity").input_value() == ENTITY
    shot(page, "memories-bad-date")
    # the page speaks to a person: what happened and what to do here, never the agent's suggestion
    # or fix (tools and arguments), and the code only in the collapsed details
    refused = httpx.post(
        f"{serve_console.base}/v1/list_facts",
        json={"entity": ENTITY, "created_after": "last tuesday-ish"},
        headers={"Authorization": f"Bearer {serve_console.read}"},
        timeout=60,
    ).json()
    agent_texts = [refused["suggestion"], *(str(v) for v in (refused.get("fix") or {}).values() if v)]
    assert refused["code"] == "invalid_params" and agent_texts[0]
    assert not [t for t in agent_texts if t in page.content()]
    assert "invalid_params" not in alert.inner_text()
    assert "Correct what you entered" in alert.inner_text()
    alert.locator("summary").click()
    assert "invalid_params" in alert.inner_text()


def test_search_shows_fact_hits_in_rank_order_and_page_evidence(
    page: Any, serve_console: Console, seeded: dict[str, Any]
) -> None:
    fired = watch_dialogs(page)
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories")
    page.get_by_label("Search memory (recall)").fill("Quokka")
    follow(page, page.get_by_role("button", name="Search"))
    hits = page.locator("ol.hits").inner_text()
    assert XSS_TEXT in hits  # stored markup is shown as its literal text
    assert "private detail" not in page.content()  # recall never gives a remote caller a private fact
    row = page.locator("table", has_text="Quokka habitat").locator("tbody tr").first
    evidence = row.locator(".tag").inner_text()
    assert evidence in {"alias_hit", "exact_title_match", "high_vector_match", "keyword_exact", "weak_semantic"}
    assert "page exists:" in row.inner_text()
    assert page.locator("img[src=x]").count() == 0 and not fired
    shot(page, "memories-search")


def test_search_with_filters_shows_only_matching_facts_with_their_times_and_no_table(
    page: Any, serve_console: Console
) -> None:
    w = serve_console.write
    for n in range(3):
        v1(serve_console, w, "remember", fact=f"Numbat colony {n} nests by the creek", provenance="survey", kind="fact")
    liked = v1(
        serve_console, w, "remember", fact="The ranger prefers numbat walks", provenance="survey", kind="preference"
    )
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?kind=preference")
    assert page.locator("table.facts").count() == 1  # without a query: the table
    page.get_by_label("Search memory (recall)").fill("numbat")
    follow(page, page.get_by_role("button", name="Search"))
    hits = page.locator("ol.hits li")
    # recall ranks (its meaning arm orders every fact): the preference first, and only preferences
    assert hits.first.locator("a").get_attribute("href") == f"/console/facts/{liked['id']}"
    assert all(" · preference · " in hit for hit in hits.all_inner_texts())
    assert page.locator("table.facts").count() == 0 and "Numbat colony" not in page.locator("main").inner_text()
    assert "kind=preference" in page.get_by_role("link", name="Back to the table of facts").get_attribute("href")
    # the hit's time: relative, the exact time on hover, never wrapped
    time = hits.first.locator("time")
    assert time.inner_text() == "just now" and time.get_attribute("title").endswith(" UTC")
    assert time.evaluate("t => getComputedStyle(t).whiteSpace") == "nowrap"
    page.get_by_label("Kind").select_option("")  # the same search without the filter finds the others too
    follow(page, page.get_by_role("button", name="Filter"))
    assert page.locator("ol.hits li", has_text="Numbat colony").count() == 3
    follow(page, page.get_by_role("link", name="Back to the table of facts"))
    cell = page.locator("table.facts tbody tr", has_text="The ranger prefers numbat walks").locator("td time")
    assert cell.get_attribute("title").endswith(" UTC") and cell.get_attribute("datetime")
    assert cell.evaluate("t => getComputedStyle(t).whiteSpace") == "nowrap"


def test_stored_markup_in_text_and_provenance_renders_inert(
    page: Any, serve_console: Console, seeded: dict[str, Any]
) -> None:
    fired = watch_dialogs(page)
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?provenance={quote('<script>')}")
    table = page.locator("table.facts").inner_text()
    assert XSS_TEXT in table and XSS_PROVENANCE in table
    page.goto(f"{serve_console.base}/console/facts/{seeded['xss']}")
    assert page.locator(".fact-text").inner_text() == XSS_TEXT
    assert page.locator("dd.provenance").inner_text() == XSS_PROVENANCE
    assert page.locator("main img, main script").count() == 0
    page.wait_for_timeout(100)
    assert not fired


def test_forget_selected_shows_a_dry_run_then_forgets_each_with_the_reason(page: Any, serve_console: Console) -> None:
    ids = [
        v1(
            serve_console,
            serve_console.write,
            "remember",
            fact=f"Memories forget batch item {n}",
            provenance="memories-forget",
            entity="projects/memories-forget",
        )["id"]
        for n in range(2)
    ]
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/memories?entity=projects/memories-forget")
    for fact_id in ids:
        page.get_by_label(f"Select fact {fact_id}").check()
    follow(page, page.get_by_role("button", name="Forget selected"))
    outcomes = page.locator("td.outcome").all_inner_texts()
    assert outcomes == ["will be forgotten", "will be forgotten"]
    assert [state_of(serve_console, i) for i in ids] == ["active", "active"]  # the dry run changed nothing
    shot(page, "memories-forget-dry-run")

    follow(page, page.get_by_role("button", name="Forget these facts"))  # no reason: refused, selection kept
    assert "Give a reason" in page.get_by_role("alert").inner_text()
    assert [state_of(serve_console, i) for i in ids] == ["active", "active"]
    page.get_by_label("Reason").fill("batch cleanup")
    follow(page, page.get_by_role("button", name="Forget these facts"))
    assert page.locator("td.outcome").all_inner_texts() == ["forgotten", "forgotten"]
    assert [state_of(serve_console, i) for i in ids] == ["forgotten", "forgotten"]
    trail = v1(serve_console, serve_console.admin, "trace_fact", id=ids[0])["events"]
    assert any(e["action"] == "expire" and e["reason"] == "batch cleanup" for e in trail)


def test_a_forged_forget_without_or_with_a_wrong_csrf_is_refused(
    page: Any, serve_console: Console, seeded: dict[str, Any]
) -> None:
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/memories")
    cookies, _ = session_of(page)
    target = seeded["ids"][0]
    for form in ({}, {"csrf": "not-the-token"}):
        r = httpx.post(
            f"{serve_console.base}/console/memories/forget",
            cookies=cookies,
            data={**form, "fact": target, "reason": "forged", "confirm": "yes"},
            follow_redirects=False,
        )
        assert r.status_code == 403 and "security token" in r.text
    assert state_of(serve_console, target) == "active"


def test_a_read_token_sees_no_forget_control_and_its_direct_post_is_refused(
    page: Any, serve_console: Console, seeded: dict[str, Any]
) -> None:
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?entity={quote(ENTITY)}")
    assert page.locator("input[type=checkbox][name=fact]").count() == 0
    assert page.get_by_role("button", name="Forget selected").count() == 0
    cookies, csrf = session_of(page)
    target = seeded["ids"][0]
    r = httpx.post(
        f"{serve_console.base}/console/memories/forget",
        cookies=cookies,
        data={"csrf": csrf, "fact": target, "reason": "read", "confirm": "yes"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "write scope" in r.text
    assert state_of(serve_console, target) == "active"


def test_another_tenant_never_sees_acmes_facts(page: Any, serve_console: Console, seeded: dict[str, Any]) -> None:
    sign_in(page, serve_console, serve_console.other_admin)
    page.goto(f"{serve_console.base}/console/memories?state=any&limit=200")
    assert "wombats" not in page.content() and "Quokka" not in page.content()
    page.goto(f"{serve_console.base}/console/memories?q=Quokka+wombats")
    hits = page.locator("section", has_text="Search results")
    # the other tenant's own facts may match (other tests write there); none of acme's ever does
    found = " ".join(hits.locator("ol.hits").all_inner_texts())
    assert "wombats" not in found and "Quokka" not in found
    assert "No page matched" in hits.inner_text()
    response = page.goto(f"{serve_console.base}/console/facts/{seeded['ids'][0]}")
    assert response is not None and response.status == 404
    assert "wombats" not in page.content()


def test_a_private_fact_is_never_shown_to_the_consoles_remote_caller(
    page: Any, serve_console: Console, seeded: dict[str, Any]
) -> None:
    # what the server does: a token's caller is remote, and list_facts hides private facts from it
    assert v1(serve_console, serve_console.admin, "whoami")["remote"] is True
    assert v1(serve_console, serve_console.admin, "list_facts", fact_id=seeded["private"])["facts"] == []
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/memories?entity={quote(ENTITY)}&state=any")
    assert "private detail" not in page.content()
    response = page.goto(f"{serve_console.base}/console/facts/{seeded['private']}")
    assert response is not None and response.status == 404 and "private detail" not in page.content()
