"""Owner safety of the console against a real `fleetmem serve` on 127.0.0.1: the per-port session
cookie, the step-up (the signed-in token typed again) before creating a token, revoking or purging,
the cap of live sessions per token, the sign-in rate limit, notices that are fixed text, post/
redirect/get, a revoked token signing the browser out, and no data directory in any 401.

The browser tests drive Debian's Chromium; the server-only ones (cookie name, session cap, rate limit,
the 401) speak HTTP to the same real server with httpx."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.conformance.test_conformance_local import mint
from tests.console.conftest import Console, follow
from tests.console.test_facts import fresh, state_of
from tests.console.test_memories import session_of
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in
from tests.mcp.served import Served, server_env

STEP_UP = "Your token, to confirm"


def http_sign_in(client: httpx.Client, base: str, token: str) -> httpx.Response:
    """Sign in as a browser would: the form (its CSRF value and cookie), then the post."""
    form = client.get(f"{base}/console/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text
    return client.post(f"{base}/console/login", data={"csrf": csrf.group(1), "token": token, "next": "/console/"})


def tokens_of(console: Console, client_id: str) -> list[dict[str, Any]]:
    listed = v1(console, console.admin, "list_tokens")["tokens"]
    return [t for t in listed if t["client_id"] == client_id]


# -- server-only ---------------------------------------------------------------------------------


def test_the_session_cookie_is_named_for_the_consoles_port(serve_console: Console) -> None:
    """Cookies ignore ports: the name carries it, so two consoles on one host keep apart."""
    port = serve_console.base.rsplit(":", 1)[1]
    with httpx.Client(follow_redirects=False, timeout=60) as client:
        r = http_sign_in(client, serve_console.base, serve_console.read)
        assert r.status_code == 303
        session = client.cookies.get(f"fleetmem_console_{port}")
        assert session
    # the same id under the port-less name (another console's cookie) opens nothing here
    r = httpx.get(f"{serve_console.base}/console/", cookies={"fleetmem_console": session}, follow_redirects=False)
    assert r.status_code == 303 and "/console/login" in r.headers["location"]
    r = httpx.get(
        f"{serve_console.base}/console/", cookies={f"fleetmem_console_{port}": session}, follow_redirects=False
    )
    assert r.status_code == 200


def test_one_token_holds_at_most_20_sessions_and_the_oldest_goes_first(serve_console: Console) -> None:
    sessions = []
    for _ in range(21):
        with httpx.Client(follow_redirects=False, timeout=60) as client:
            assert http_sign_in(client, serve_console.base, serve_console.read).status_code == 303
            sessions.append(client.cookies.get(serve_console.cookie))

    def opens(session: str) -> bool:
        r = httpx.get(
            f"{serve_console.base}/console/",
            cookies={serve_console.cookie: session},
            follow_redirects=False,
            timeout=60,
        )
        return r.status_code == 200

    assert not opens(sessions[0])  # the 21st sign-in ended the oldest
    assert all(opens(s) for s in sessions[1:])


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A second `fleetmem serve` allowing 3 sign-ins per address and minute."""
    tmp = tmp_path_factory.mktemp("console-limited")
    env = server_env(FLEETMEM_MODEL_DIR=str(tmp / "no-model"), FLEETMEM_CONSOLE_SIGN_INS_PER_MINUTE="3")
    server = Served(tmp, env, args=("--surface", "full"))
    server.token = mint(env, tmp / "data", "read", "limited-read", tenant="acme")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_sign_in_is_rate_limited_per_address_with_a_429_page(limited: Served) -> None:
    with httpx.Client(follow_redirects=False, timeout=60) as client:
        for _ in range(3):
            assert http_sign_in(client, limited.url, "fm_wrong").status_code == 401
        r = http_sign_in(client, limited.url, limited.token)  # the right token, but one attempt too many
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
        assert "Too many sign-in attempts" in r.text and "nothing was checked" in r.text
        assert not any(name.startswith("fleetmem_console_") and "login" not in name for name in client.cookies)


def test_no_401_names_the_data_directory(serve_console: Console, page: Any) -> None:
    data_dir = str(serve_console.server.data_dir)
    for path in ("/v1/whoami", "/mcp"):
        r = httpx.post(f"{serve_console.base}{path}", json={}, timeout=60)
        assert r.status_code == 401 and data_dir not in r.text, path
        r = httpx.post(f"{serve_console.base}{path}", json={}, headers={"Authorization": "Bearer fm_x"}, timeout=60)
        assert r.status_code == 401 and data_dir not in r.text, path
    sign_in(page, serve_console, "fm_not-a-token")
    assert data_dir not in page.content()


# -- step-up -------------------------------------------------------------------------------------


def test_creating_a_token_asks_for_the_signed_in_token_again(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/tokens")
    cookies, csrf = session_of(page)
    # a stolen session cookie (and the form's CSRF value) is not enough
    r = httpx.post(
        f"{serve_console.base}/console/tokens/create",
        cookies=cookies,
        data={"csrf": csrf, "client": "stepup-stolen", "scope": "admin"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "fm_" not in r.text
    assert tokens_of(serve_console, "stepup-stolen") == []
    page.get_by_label("Client name").fill("stepup-bot")
    page.get_by_label(STEP_UP).fill(serve_console.write)  # a real token, but not this session's
    follow(page, page.get_by_role("button", name="Create token"))
    assert "type the token you signed in with" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Client name").input_value() == "stepup-bot"
    assert tokens_of(serve_console, "stepup-bot") == []
    page.get_by_label(STEP_UP).fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Create token"))
    assert page.get_by_label("Token for stepup-bot").input_value().startswith("fm_")
    assert len(tokens_of(serve_console, "stepup-bot")) == 1


def test_revoking_and_purging_ask_for_the_signed_in_token_again(page: Any, serve_console: Console) -> None:
    made = v1(serve_console, serve_console.admin, "create_token", client="stepup-victim", scopes=["read"])
    target = fresh(serve_console, "Owner safety: purge needs the token again")
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/tokens")
    cookies, csrf = session_of(page)
    forged = (
        ("/tokens/revoke", {"token_id": made["token_id"], "confirm": "yes"}),
        (f"/facts/{target}/purge", {"confirm_id": target}),
    )
    for path, form in forged:
        for step_up in ({}, {"confirm_token": serve_console.write}):
            r = httpx.post(
                f"{serve_console.base}/console{path}",
                cookies=cookies,
                data={"csrf": csrf, **form, **step_up},
                follow_redirects=False,
            )
            assert r.status_code == 403 and "type the token you signed in with" in r.text, path
    assert (
        httpx.post(
            f"{serve_console.base}/v1/whoami", json={}, headers={"Authorization": f"Bearer {made['token']}"}
        ).status_code
        == 200
    )
    assert state_of(serve_console, target) == "active"
    # in the browser, with the token typed: both go through
    row = page.locator("tr", has_text="stepup-victim")
    follow(page, row.get_by_role("button"))
    page.get_by_label(STEP_UP).fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Revoke for good"))
    assert "is revoked" in page.get_by_role("status").inner_text()
    assert (
        httpx.post(
            f"{serve_console.base}/v1/whoami", json={}, headers={"Authorization": f"Bearer {made['token']}"}
        ).status_code
        == 401
    )


# -- notices, post/redirect/get, revocation ------------------------------------------------------


def test_a_notice_is_fixed_text_never_text_from_the_url(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    lure = "Your account is closed, call 555-0100"
    for query in (f"deleted={quote(lure)}", f"done={quote(lure)}"):
        page.goto(f"{serve_console.base}/console/pages?{query}")
        assert lure not in page.content() and page.get_by_role("status").count() == 0
    page.goto(f"{serve_console.base}/console/pages?done=page-deleted")
    assert page.get_by_role("status").inner_text() == "The page was deleted."


def test_reloading_the_new_token_page_mints_no_second_token(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.admin)
    page.goto(f"{serve_console.base}/console/tokens")
    page.get_by_label("Client name").fill("prg-bot")
    page.get_by_label(STEP_UP).fill(serve_console.admin)
    follow(page, page.get_by_role("button", name="Create token"))
    assert page.url.endswith("/console/tokens/created")  # a GET after the post's redirect
    token = page.get_by_label("Token for prg-bot").input_value()
    page.reload()
    assert token not in page.content() and "shown only once" in page.get_by_role("status").inner_text()
    assert len(tokens_of(serve_console, "prg-bot")) == 1


def test_a_revoked_token_signs_the_browser_out_with_a_message(page: Any, serve_console: Console) -> None:
    made = v1(serve_console, serve_console.admin, "create_token", client="revoked-midway", scopes=["read"])
    sign_in(page, serve_console, made["token"])
    session = next(c for c in page.context.cookies() if c["name"] == serve_console.cookie)["value"]
    v1(serve_console, serve_console.admin, "revoke_token", token_id=made["token_id"])
    page.goto(f"{serve_console.base}/console/memories")
    assert "/console/login" in page.url
    assert "no longer accepts the token" in page.get_by_role("status").inner_text()
    shown = page.locator("body").inner_text()  # what a person reads (not the form's random values)
    assert "No fact matches" not in shown and "401" not in shown and "unauthorized" not in shown
    assert str(serve_console.server.data_dir) not in page.content()
    assert not [c for c in page.context.cookies() if c["name"] == serve_console.cookie]
    r = httpx.get(f"{serve_console.base}/console/", cookies={serve_console.cookie: session}, follow_redirects=False)
    assert r.status_code == 303 and "/console/login" in r.headers["location"]


# -- pages, forget, messages, times --------------------------------------------------------------


def test_an_edit_of_a_page_deleted_meanwhile_is_kept_and_can_re_create_it(page: Any, serve_console: Console) -> None:
    slug = "topics/owner-deleted-meanwhile"
    v1(serve_console, serve_console.write, "put_page", slug=slug, content="---\ntitle: Gone Soon\n---\nold\n")
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/edit-page/{slug}")
    v1(serve_console, serve_console.write, "delete_page", slug=slug)  # meanwhile, through /v1
    mine = "---\ntitle: Gone Soon\n---\nmy edit\n"
    box = page.get_by_label("Content (markdown with YAML frontmatter)")
    box.fill(mine)
    with page.expect_navigation() as nav:
        page.get_by_role("button", name="Save").click()
    assert nav.value.status == 409
    assert "was deleted after you opened it" in page.get_by_role("alert").inner_text()
    assert box.input_value() == mine
    follow(page, page.get_by_role("button", name="Save"))  # re-create it with the kept text
    assert page.url.endswith(f"/console/pages/{slug}")
    assert "my edit" in page.locator("pre.page").inner_text()


def test_a_stale_edit_is_refused_409_in_words_for_people(page: Any, serve_console: Console) -> None:
    slug = "topics/owner-stale"
    v1(serve_console, serve_console.write, "put_page", slug=slug, content="---\ntitle: Stale\n---\nfirst\n")
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/edit-page/{slug}")
    v1(serve_console, serve_console.write, "put_page", slug=slug, content="---\ntitle: Stale\n---\ntheirs\n")
    page.get_by_label("Content (markdown with YAML frontmatter)").fill("---\ntitle: Stale\n---\nmine\n")
    with page.expect_navigation() as nav:
        page.get_by_role("button", name="Save").click()
    assert nav.value.status == 409
    alert = page.get_by_role("alert").inner_text()
    assert "your edit was not saved" in alert
    for agent_words in ("get_page", "put_page", "expected_updated_at", "tools/list"):
        assert agent_words not in alert


def test_a_refusal_shows_the_message_and_a_next_step_for_people(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?after=last-tuesday-ish")
    alert = page.get_by_role("alert")
    assert "created_after" in alert.locator("p").first.inner_text()  # the server's message
    assert alert.locator("p.fix").inner_text() == "Correct what you entered (it is kept in the form) and submit again."


def test_the_bulk_forget_report_names_each_fact_and_the_reason(page: Any, serve_console: Console) -> None:
    texts = [f"Owner bulk forget item {n}" for n in range(2)]
    ids = [
        v1(
            serve_console,
            serve_console.write,
            "remember",
            fact=t,
            provenance="owner-forget",
            entity="projects/owner-forget",
        )["id"]
        for t in texts
    ]
    sign_in(page, serve_console, serve_console.write)
    page.goto(f"{serve_console.base}/console/memories?entity=projects/owner-forget")
    for fact_id in ids:
        page.get_by_label(f"Select fact {fact_id}").check()
    follow(page, page.get_by_role("button", name="Forget selected"))
    page.get_by_label("Reason").fill("owner cleanup")
    follow(page, page.get_by_role("button", name="Forget these facts"))
    assert page.url.endswith("/console/memories/forgotten")  # post/redirect/get
    rows = page.locator("tbody tr")
    assert sorted(rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())) == sorted(texts)
    assert "owner cleanup" in page.locator("caption").inner_text()
    page.reload()  # shows the report again, forgets nothing twice
    assert page.locator("td.outcome").all_inner_texts() == ["forgotten", "forgotten"]


def test_search_keeps_to_the_filters_and_shows_no_unfiltered_table(page: Any, serve_console: Console) -> None:
    v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Owner zebrafinch prefers tea",
        kind="preference",
        provenance="owner-search",
        entity="people/owner-search",
    )
    v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Owner zebrafinch met the team",
        kind="event",
        provenance="owner-search",
        entity="people/owner-search",
    )
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/memories?q=zebrafinch&kind=preference")
    hits = page.locator("ol.hits").inner_text()
    assert "prefers tea" in hits and "met the team" not in hits
    assert page.locator("table.facts").count() == 0


def test_a_recent_time_reads_relatively_with_the_exact_time_on_hover(page: Any, serve_console: Console) -> None:
    target = fresh(serve_console, "Owner safety: a fact with a creation time")
    created = v1(serve_console, serve_console.read, "list_facts", fact_id=target)["facts"][0]["created_at"]
    sign_in(page, serve_console, serve_console.read)
    page.goto(f"{serve_console.base}/console/facts/{target}")
    shown = page.locator(f"dl.props time[datetime='{created}']")
    assert shown.count() == 1
    # written moments ago: told relatively, the exact time (to the second, in UTC) on hover
    assert re.fullmatch(r"just now|\d+ min ago", shown.inner_text())
    exact = shown.get_attribute("title") or ""
    assert re.fullmatch(r"\d{1,2} [A-Z][a-z]{2} \d{4}, \d{2}:\d{2}:\d{2} UTC", exact)
    assert exact.endswith(f"{created[11:19]} UTC")
    assert shown.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"


def test_no_near_misses_are_promised_when_there_are_none(page: Any, serve_console: Console) -> None:
    sign_in(page, serve_console, serve_console.read)
    response = page.goto(f"{serve_console.base}/console/entities/qqxv-nothing-like-it")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", name="Did you mean").count() == 0
    assert "near misses" not in page.get_by_role("alert").inner_text()
