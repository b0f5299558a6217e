"""The fact detail screen in the browser against a real `fleetmem serve`: the fact's properties, its
supersession chain and audit trail (admin), forget with a reason, purge confirmed by the id, and what a
read token, another tenant and a forged post get."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.console.conftest import Console, follow, shot
from tests.console.test_memories import session_of, state_of
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in


@pytest.fixture(scope="module")
def chain(serve_console: Console) -> tuple[str, str]:
    """An old fact and the newer one that superseded it."""
    old = v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Facts screen: Ada's desk is 3A",
        provenance="facts-test",
        entity="people/ada-facts",
        session_id="facts-session",
        ttl="30d",
    )["id"]
    new = v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Facts screen: Ada's desk is 5C",
        provenance="facts-test",
        entity="people/ada-facts",
        supersedes=old,
    )["id"]
    return str(old), str(new)


def fresh(console: Console, text: str) -> str:
    return str(
        v1(console, console.write, "remember", fact=text, provenance="facts-test", entity="people/ada-facts")["id"]
    )


def test_an_admin_sees_the_fact_its_chain_and_audit_trail(
    page: Any, serve_console: Console, chain: tuple[str, str]
) -> None:
    old, new = chain
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/facts/{old}")
    props = page.locator("dl.props").inner_text()
    assert "superseded" in props and "facts-test" in props and "facts-session" in props
    assert "console-write" in props  # the client that wrote it
    assert "no expiry" not in props  # a TTL was given: valid until shows its time
    steps = page.locator("ol.timeline li").all_inner_texts()
    assert len(steps) == 2 and "3A" in steps[0] and "5C" in steps[1]
    audit = page.locator("section", has_text="Audit trail").locator("tbody").inner_text()
    assert "write" in audit and "console-write" in audit
    shot(page, "fact-detail")
    follow(page, page.get_by_role("link", name="Facts screen: Ada's desk is 5C"))
    assert page.url.endswith(f"/console/facts/{new}")


def test_without_admin_the_chain_comes_from_list_facts_and_the_audit_trail_is_withheld(
    page: Any, serve_console: Console, chain: tuple[str, str]
) -> None:
    old, _ = chain
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/facts/{old}")
    assert len(page.locator("ol.timeline li").all_inner_texts()) == 2
    assert "needs the admin scope" in page.locator(".audit-needs-admin").inner_text()
    # a read token sees no forget or purge control, and its direct posts are refused
    assert page.get_by_role("button", name="Forget").count() == 0
    assert page.get_by_role("button", name="Purge for good").count() == 0
    cookies, csrf = session_of(page)
    target = fresh(serve_console, "Facts screen: read token target")
    for action, form in (("forget", {"reason": "x"}), ("purge", {"confirm_id": target})):
        r = httpx.post(
            f"{serve_console.base}/console/facts/{target}/{action}",
            cookies=cookies,
            data={"csrf": csrf, **form},
            follow_redirects=False,
        )
        assert r.status_code == 403
    assert state_of(serve_console, target) == "active"


def test_forget_needs_a_reason_then_expires_the_fact(page: Any, serve_console: Console) -> None:
    target = fresh(serve_console, "Facts screen: forget me from the detail page")
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/facts/{target}")
    assert page.get_by_role("button", name="Purge for good").count() == 0  # admin only
    follow(page, page.get_by_role("button", name="Forget", exact=True))
    assert "Give a reason" in page.get_by_role("alert").inner_text()
    assert state_of(serve_console, target) == "active"
    page.get_by_label("Reason").fill("wrong desk")
    follow(page, page.get_by_role("button", name="Forget", exact=True))
    assert "Forgotten" in page.get_by_role("status").inner_text()
    assert state_of(serve_console, target) == "forgotten"
    assert "wrong desk" in page.locator("dl.props").inner_text()


def test_purge_asks_for_the_id_then_deletes_and_the_fact_is_gone(page: Any, serve_console: Console) -> None:
    target = fresh(serve_console, "Facts screen: purge me for good")
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/facts/{target}")
    page.get_by_label("Reason", exact=False).last.fill("deletion request")
    page.get_by_label("Type the fact id").fill("f_wrong")
    page.get_by_label("Your token, to confirm").fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Purge for good"))
    assert "Type the fact's id exactly" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Type the fact id").input_value() == "f_wrong"  # what was typed is kept
    assert state_of(serve_console, target) == "active"
    shot(page, "fact-purge-refused")
    page.get_by_label("Type the fact id").fill(target)
    page.get_by_label("Your token, to confirm").fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Purge for good"))
    assert "deleted for good" in page.get_by_role("status").inner_text()
    assert state_of(serve_console, target) is None
    response = page.goto(f"{serve_console.base}/console/facts/{target}")
    assert response is not None and response.status == 404


def test_a_forged_purge_is_refused_and_nothing_is_deleted(page: Any, serve_console: Console) -> None:
    target = fresh(serve_console, "Facts screen: forged purge target")
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/facts/{target}")
    cookies, _ = session_of(page)
    for form in ({}, {"csrf": "wrong"}):
        r = httpx.post(
            f"{serve_console.base}/console/facts/{target}/purge",
            cookies=cookies,
            data={**form, "confirm_id": target},
            follow_redirects=False,
        )
        assert r.status_code == 403
    assert state_of(serve_console, target) == "active"


def test_an_unknown_or_foreign_id_is_not_found(page: Any, serve_console: Console, chain: tuple[str, str]) -> None:
    sign_in(page, serve_console, serve_console.admin)
    response = page.goto(f"{serve_console.base}/console/facts/f_01NOTAFACT")
    assert response is not None and response.status == 404
    assert "No fact with id" in page.get_by_role("alert").inner_text()
    other = page.context.browser.new_context().new_page()
    try:
        sign_in(other, serve_console, serve_console.other_admin)
        response = other.goto(f"{serve_console.base}/console/facts/{chain[0]}")
        assert response is not None and response.status == 404 and "Ada" not in other.content()
    finally:
        other.context.close()
