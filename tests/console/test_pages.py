"""The console's pages in the browser: the list (type filter, next_cursor paging, search), one page as
stored, new / edit / delete with the write scope, the edit refused after someone else's save, and
stored markup, scopes, CSRF, tenants and private pages."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.console.conftest import Console, follow, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in

XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
XSS_SLUG = "people/cw2-xss"
ATLAS = "projects/cw2-atlas"
SECRET = "people/cw2-secret"


def put(console: Console, slug: str, content: str, **extra: Any) -> dict[str, Any]:
    return v1(console, console.write, "put_page", slug=slug, content=content, **extra)


def get(console: Console, slug: str) -> httpx.Response:
    return httpx.post(
        f"{console.base}/v1/get_page",
        json={"slug": slug},
        headers={"Authorization": f"Bearer {console.admin}"},
        timeout=60,
    )


@pytest.fixture(scope="module")
def seeded(serve_console: Console) -> Console:
    put(
        serve_console,
        ATLAS,
        "---\ntitle: Atlas Cw2\ntype: project\naliases: [Atlas]\nsummary: The atlas "
        "project.\n---\nAtlas maps the fleet. See [[people/cw2-xss]].\n",
    )
    put(
        serve_console,
        XSS_SLUG,
        f"Body {SCRIPT} and {XSS}\n",
        title=f"T {XSS}",
        aliases=[SCRIPT],
        links=[{"type": "related", "target": ATLAS, "context": f"ctx {XSS}"}],
    )
    put(serve_console, SECRET, "---\ntitle: Secret Cw2\nvisibility: private\ntype: cw2kind\n---\nhidden\n")
    for n in range(3):
        put(serve_console, f"topics/cw2-kind-{n}", f"---\ntitle: Kind {n}\ntype: cw2kind\n---\nk{n}\n")
    return serve_console


def dialogs(page: Any) -> list[str]:
    fired: list[str] = []
    page.on("dialog", lambda d: (fired.append(d.message), d.dismiss()))
    return fired


def test_the_list_filters_by_type_and_pages_by_cursor(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/pages?type=cw2kind&limit=2")
    rows = page.locator("tbody tr")
    assert rows.count() == 2 and "Kind 0" in rows.nth(0).inner_text()
    assert "Secret Cw2" not in page.content()  # private: the console is a remote caller
    shot(page, "pages")
    follow(page, page.get_by_role("link", name="Next"))
    assert page.locator("tbody tr").count() == 1 and "Kind 2" in page.locator("tbody").inner_text()
    assert page.get_by_role("link", name="Next").count() == 0


def test_a_bad_cursor_shows_the_servers_message(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/pages?cursor=not-a-cursor")
    assert "cursor" in page.get_by_role("alert").inner_text()


def test_search_shows_the_pages_recall_finds(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/pages")
    page.get_by_label("Search").fill("atlas maps the fleet")
    follow(page, page.get_by_role("button", name="Search"))
    assert page.get_by_role("link", name="Atlas Cw2").count() >= 1


def test_a_page_shows_stored_markup_as_text(page: Any, seeded: Console) -> None:
    fired = dialogs(page)
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/pages/{XSS_SLUG}")
    assert page.get_by_role("heading", level=1).inner_text() == f"T {XSS}"
    text = page.locator("main").inner_text()
    assert SCRIPT in text and f"ctx {XSS}" in text and XSS_SLUG in text
    assert f"Body {SCRIPT} and {XSS}" in page.locator("pre.page").inner_text()
    assert page.locator("main img, main script").count() == 0
    assert page.get_by_role("link", name="Edit").count() == 0  # a read token: no write controls
    shot(page, "page")
    assert fired == []


def test_an_unknown_page_is_a_not_found_page_with_a_search(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.read)
    response = page.goto(f"{seeded.base}/console/pages/people/cw2-nobody")
    assert response is not None and response.status == 404
    assert page.get_by_label("Search the pages").input_value() == "people/cw2-nobody"


def test_edit_saves_the_full_markdown(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.write)
    page.goto(f"{seeded.base}/console/pages/{ATLAS}")
    follow(page, page.get_by_role("link", name="Edit"))
    box = page.get_by_label("Content (markdown with YAML frontmatter)")
    content = box.input_value()
    assert content == get(seeded, ATLAS).json()["content"] and content.startswith("---\ntitle: Atlas Cw2")
    shot(page, "page-edit")
    box.fill(content.replace("Atlas maps the fleet.", "Atlas maps the whole fleet."))
    follow(page, page.get_by_role("button", name="Save"))
    assert page.url.endswith(f"/console/pages/{ATLAS}")
    assert "Atlas maps the whole fleet." in page.locator("pre.page").inner_text()


def test_a_save_after_someone_elses_save_is_refused_and_the_text_kept(page: Any, seeded: Console) -> None:
    slug = "topics/cw2-conflict"
    put(seeded, slug, "---\ntitle: Conflict\n---\nfirst\n")
    sign_in(page, seeded, seeded.write)
    page.goto(f"{seeded.base}/console/edit-page/{slug}")
    put(seeded, slug, "---\ntitle: Conflict\n---\nsomeone else's\n")  # meanwhile, through /v1
    mine = "---\ntitle: Conflict\n---\nmine\n"
    page.get_by_label("Content (markdown with YAML frontmatter)").fill(mine)
    follow(page, page.get_by_role("button", name="Save"))
    assert "was changed" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Content (markdown with YAML frontmatter)").input_value() == mine
    assert "someone else's" in get(seeded, slug).json()["content"]


def test_malformed_frontmatter_shows_put_pages_message_and_keeps_the_text(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.write)
    page.goto(f"{seeded.base}/console/edit-page/{ATLAS}")
    bad = "---\ntitle: [unclosed\n---\nbody\n"
    page.get_by_label("Content (markdown with YAML frontmatter)").fill(bad)
    follow(page, page.get_by_role("button", name="Save"))
    alert = page.get_by_role("alert").inner_text()
    assert "Not accepted." in alert and "frontmatter" in alert
    assert page.get_by_label("Content (markdown with YAML frontmatter)").input_value() == bad
    shot(page, "page-edit-refused")


def test_new_page_with_a_bad_slug_is_refused_then_created_and_deleted(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.write)
    page.goto(f"{seeded.base}/console/pages")
    follow(page, page.get_by_role("link", name="New page"))
    text = "---\ntitle: Fresh Cw2\n---\nnew body\n"
    page.get_by_label("Slug").fill("Topics/Fresh CW2")
    page.get_by_label("Content (markdown with YAML frontmatter)").fill(text)
    follow(page, page.get_by_role("button", name="Save"))
    assert "not a valid page slug" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Content (markdown with YAML frontmatter)").input_value() == text
    assert page.get_by_label("Slug").input_value() == "Topics/Fresh CW2"
    page.get_by_label("Slug").fill("topics/fresh-cw2")
    follow(page, page.get_by_role("button", name="Save"))
    assert page.get_by_role("heading", level=1).inner_text() == "Fresh Cw2"
    follow(page, page.get_by_role("link", name="Delete"))
    shot(page, "page-delete")
    assert get(seeded, "topics/fresh-cw2").status_code == 200  # nothing gone before the confirmation
    follow(page, page.get_by_role("button", name="Delete the page"))
    assert "The page was deleted." in page.get_by_role("status").inner_text()
    assert get(seeded, "topics/fresh-cw2").status_code == 404


def test_a_new_page_over_an_existing_slug_is_refused_and_the_text_kept(page: Any, seeded: Console) -> None:
    slug = "topics/cw2-taken"
    put(seeded, slug, "---\ntitle: Taken\n---\ntheirs\n")
    sign_in(page, seeded, seeded.write)
    page.goto(f"{seeded.base}/console/new-page")
    mine = "---\ntitle: Taken\n---\nmine\n"
    page.get_by_label("Slug").fill(slug)
    page.get_by_label("Content (markdown with YAML frontmatter)").fill(mine)
    follow(page, page.get_by_role("button", name="Save"))
    assert "already exists" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Content (markdown with YAML frontmatter)").input_value() == mine
    assert "theirs" in get(seeded, slug).json()["content"]


def _session(page: Any) -> tuple[dict[str, str], str]:
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    csrf = page.locator("form[action='/console/logout'] input[name=csrf]").get_attribute("value")
    return cookies, csrf


def test_a_read_token_sees_no_write_control_and_its_post_is_refused(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/pages")
    assert page.get_by_role("link", name="New page").count() == 0
    page.goto(f"{seeded.base}/console/pages/{ATLAS}")
    assert page.get_by_role("link", name="Delete").count() == 0
    before = get(seeded, ATLAS).json()["content"]
    cookies, csrf = _session(page)
    for path, form in ((f"/edit-page/{ATLAS}", {"content": "x", "loaded_at": ""}), (f"/delete-page/{ATLAS}", {})):
        r = httpx.post(
            f"{seeded.base}/console{path}", data={"csrf": csrf, **form}, cookies=cookies, follow_redirects=False
        )
        assert r.status_code == 403 and "write scope" in r.text
    assert get(seeded, ATLAS).json()["content"] == before
    r = httpx.post(
        f"{seeded.base}/v1/put_page",
        json={"slug": ATLAS, "content": "x"},
        headers={"Authorization": f"Bearer {seeded.read}"},
        timeout=60,
    )
    assert r.status_code == 403 and r.json()["code"] == "scope_denied"  # and the server refuses it too


def test_a_forged_post_without_the_form_token_is_refused(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.write)
    before = get(seeded, ATLAS).json()
    cookies, _ = _session(page)
    r = httpx.post(
        f"{seeded.base}/console/edit-page/{ATLAS}",
        data={"content": "forged", "loaded_at": before["updated_at"]},
        cookies=cookies,
        follow_redirects=False,
    )
    assert r.status_code == 403 and "security token" in r.text
    r = httpx.post(f"{seeded.base}/console/delete-page/{ATLAS}", data={}, cookies=cookies, follow_redirects=False)
    assert r.status_code == 403
    assert get(seeded, ATLAS).json()["content"] == before["content"]


def test_another_tenant_and_private_pages_look_missing(page: Any, seeded: Console) -> None:
    sign_in(page, seeded, seeded.admin)
    response = page.goto(f"{seeded.base}/console/pages/{SECRET}")  # private: the console caller is remote
    assert response is not None and response.status == 404
    assert get(seeded, SECRET).status_code == 404  # the server answers /v1 the same way
    other = page.context.browser.new_context().new_page()
    try:
        sign_in(other, seeded, seeded.other_admin)
        for path in (f"/pages/{ATLAS}", f"/edit-page/{ATLAS}", f"/entities/{ATLAS}"):
            response = other.goto(f"{seeded.base}/console{path}")
            assert response is not None and response.status == 404, path
        other.goto(f"{seeded.base}/console/pages?type=project")
        assert "Atlas" not in other.locator("main").inner_text()
    finally:
        other.context.close()


@pytest.mark.parametrize("slug", ["notes/cw2-edit", "notes/cw2-delete", "new"])
def test_a_slug_that_reads_like_an_action_is_still_its_page(page: Any, seeded: Console, slug: str) -> None:
    """The edit, delete and new forms live beside the page view, never under a page's own path."""
    put(seeded, slug, f"---\ntitle: Named {slug}\n---\nbody\n")
    sign_in(page, seeded, seeded.write)
    page.goto(f"{seeded.base}/console/pages/{slug}")
    assert page.get_by_role("heading", name=f"Named {slug}").count() == 1
    follow(page, page.get_by_role("link", name="Edit"))
    assert f"Named {slug}" in page.locator("textarea").input_value()
