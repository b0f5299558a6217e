"""Correcting memory in the browser against a real `fleetmem serve`: replace a fact with a reason
(seen in the timeline and the audit trail), restore a forgotten fact, add a fact from the entity
screen, resolve an entity's conflicting values with "keep this one", and what a read token gets."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.console.conftest import Console, follow, shot
from tests.console.test_memories import session_of, state_of
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in

ENTITY = "people/corr-zed"


@pytest.fixture(scope="module")
def zed(serve_console: Console) -> str:
    v1(
        serve_console,
        serve_console.write,
        "put_page",
        slug=ENTITY,
        content="---\ntitle: Zed Corr\ntype: person\n---\nZed.\n",
    )
    return ENTITY


def remember(console: Console, text: str, **extra: Any) -> str:
    args = {"provenance": "corrections-test", "entity": ENTITY, **extra}
    return str(v1(console, console.write, "remember", fact=text, **args)["id"])


def fact_of(console: Console, fact_id: str) -> dict[str, Any]:
    return v1(console, console.admin, "list_facts", fact_id=fact_id)["facts"][0]


def active_texts(console: Console, needle: str) -> list[str]:
    facts = v1(console, console.admin, "list_facts", entity=ENTITY, limit=200)["facts"]
    return sorted(f["fact"] for f in facts if needle in f["fact"])


def test_replace_needs_a_reason_then_the_timeline_shows_who_when_and_why(
    page: Any, serve_console: Console, zed: str
) -> None:
    old = remember(serve_console, "Zed's parking spot is P4")
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/facts/{old}")
    page.get_by_label("New value").fill("Zed's parking spot is P9")
    follow(page, page.get_by_role("button", name="Replace", exact=True))
    assert "why it changed" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("New value").input_value() == "Zed's parking spot is P9"  # kept
    assert state_of(serve_console, old) == "active"
    page.get_by_label("Why it changed").fill("moved to the new garage")
    follow(page, page.get_by_role("button", name="Replace", exact=True))
    assert "Replaced" in page.get_by_role("status").inner_text()
    new = page.url.rsplit("/", 1)[1].split("?")[0]
    assert new != old and state_of(serve_console, old) == "superseded"
    assert fact_of(serve_console, new)["supersedes"] == old
    steps = page.locator("ol.timeline li").all_inner_texts()
    assert len(steps) == 2 and "P4" in steps[0] and "P9" in steps[1]
    assert "console-write" in steps[1] and "moved to the new garage" in steps[1]
    assert "console: console-write; reason: moved to the new garage" in page.locator("dl.props").inner_text()
    shot(page, "fact-replaced")
    # the admin's audit trail names the client and carries the reason with the supersession
    admin = page.context.browser.new_context().new_page()
    try:
        sign_in(admin, serve_console, serve_console.admin)
        admin.goto(f"{serve_console.base}/console/facts/{old}")
        rows = admin.locator("section", has_text="Audit trail").locator("tbody tr").all_inner_texts()
        supersede = [r for r in rows if "supersede" in r]
        assert supersede and "console-write" in supersede[0] and "moved to the new garage" in supersede[0]
    finally:
        admin.context.close()


def test_a_forgotten_fact_is_restored_and_only_a_forgotten_one_offers_it(
    page: Any, serve_console: Console, zed: str
) -> None:
    gone = remember(serve_console, "Zed speaks Portuguese")
    v1(serve_console, serve_console.write, "forget", id=gone, reason="wrong person")
    refused = httpx.post(
        f"{serve_console.base}/v1/remember",
        json={"fact": "Zed speaks Portuguese", "provenance": "t", "entity": ENTITY},
        headers={"Authorization": f"Bearer {serve_console.write}"},
        timeout=60,
    )
    assert "fact_withdrawn" in refused.json()["message"]  # the claim is withdrawn until restored
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/facts/{gone}")
    assert page.get_by_role("button", name="Replace", exact=True).count() == 0  # not on a forgotten fact
    page.get_by_label("Why it is restored").fill("it was the right person after all")
    follow(page, page.get_by_role("button", name="Restore"))
    assert "Restored" in page.get_by_role("status").inner_text()
    back = page.url.rsplit("/", 1)[1].split("?")[0]
    restored = fact_of(serve_console, back)
    assert back != gone and restored["status"] == "active" and restored["fact"] == "Zed speaks Portuguese"
    assert restored["entity_slug"] == ENTITY and f"restored {gone}" in restored["provenance"]
    assert "console-write" in restored["provenance"] and "right person" in restored["provenance"]
    assert page.get_by_role("button", name="Restore").count() == 0  # an active fact offers no restore
    assert state_of(serve_console, gone) == "forgotten"


def test_a_fact_is_added_from_the_entity_screen(page: Any, serve_console: Console, zed: str) -> None:
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/entities/{ENTITY}")
    follow(page, page.get_by_role("button", name="Add the fact"))
    assert "Write the fact" in page.get_by_role("alert").inner_text()
    page.get_by_label("Fact (one self-contained sentence)").fill("Zed prefers window seats")
    page.get_by_label("Kind").select_option("preference")
    page.get_by_label("Source or note").fill("told us on the phone")
    follow(page, page.get_by_role("button", name="Add the fact"))
    assert "Saved" in page.get_by_role("status").inner_text()
    added = fact_of(serve_console, page.url.rsplit("/", 1)[1].split("?")[0])
    assert added["fact"] == "Zed prefers window seats" and added["entity_slug"] == ENTITY
    assert added["kind"] == "preference"
    assert added["provenance"] == "console: console-write; told us on the phone"


def test_keep_this_one_resolves_a_conflict(page: Any, serve_console: Console, zed: str) -> None:
    # three values of one attribute; the kept one is neither the oldest nor the newest
    remember(serve_console, "Zed's desk is 2B")
    kept = remember(serve_console, "Zed's desk is 4D")
    remember(serve_console, "Zed's desk is 7F")
    # and one where the kept value is the oldest, so each other value is newer than it
    first = remember(serve_console, "Zed's locker is L1")
    remember(serve_console, "Zed's locker is L2")
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/entities/{ENTITY}")
    desk = page.get_by_label("Conflict: Zed's desk")
    assert desk.locator("li").count() == 3
    shot(page, "entity-conflicts")
    follow(page, desk.get_by_role("button", name="Keep this one: Zed's desk is 4D"))
    assert "Resolved" in page.get_by_role("status").inner_text()
    assert page.get_by_label("Conflict: Zed's desk").count() == 0
    assert active_texts(serve_console, "desk") == ["Zed's desk is 4D"]
    assert state_of(serve_console, kept) != "active"  # restated by the fact that replaced the others
    follow(
        page,
        page.get_by_label("Conflict: Zed's locker").get_by_role("button", name="Keep this one: Zed's locker is L1"),
    )
    assert "Resolved" in page.get_by_role("status").inner_text()
    assert active_texts(serve_console, "locker") == ["Zed's locker is L1"]
    assert state_of(serve_console, first) == "active"
    assert "No conflicting values" in page.locator("section", has_text="Conflicts").inner_text()


def test_a_read_token_sees_no_correction_controls_and_its_posts_are_refused(
    page: Any, serve_console: Console, zed: str
) -> None:
    live = remember(serve_console, "Zed's badge is B-100")
    remember(serve_console, "Zed's badge is B-200")
    gone = remember(serve_console, "Zed drives a red car")
    v1(serve_console, serve_console.write, "forget", id=gone, reason="sold it")
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/facts/{live}")
    assert page.get_by_role("button", name="Replace", exact=True).count() == 0
    page.goto(f"{serve_console.base}/console/facts/{gone}")
    assert page.get_by_role("button", name="Restore").count() == 0
    page.goto(f"{serve_console.base}/console/entities/{ENTITY}")
    assert page.get_by_label("Conflict: Zed's badge").locator("li").count() == 2  # the view is read-only
    assert page.get_by_role("button", name="Keep this one", exact=False).count() == 0
    assert page.get_by_role("button", name="Add the fact").count() == 0
    cookies, csrf = session_of(page)
    before = active_texts(serve_console, "Zed")
    for path, form in (
        (f"facts/{live}/replace", {"fact": "Zed's badge is B-999", "reason": "x"}),
        (f"facts/{gone}/restore", {}),
        (f"facts/{live}/keep", {}),
        ("facts", {"entity": ENTITY, "fact": "Zed is an impostor"}),
    ):
        r = httpx.post(
            f"{serve_console.base}/console/{path}", cookies=cookies, data={"csrf": csrf, **form}, follow_redirects=False
        )
        assert r.status_code == 403 and "scope_denied" in r.text and "write scope" in r.text, path
    assert active_texts(serve_console, "Zed") == before
    assert state_of(serve_console, gone) == "forgotten"
