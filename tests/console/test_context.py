"""The console's context preview: the very text a session-start hook injects for the same entities and
budget (the hook's own rendering of the same context_pack answer), its token count, what the budget
cut, and the server's refusal of a bad budget."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from fleetmem.hooks.claude_code import HookLog, ProjectConfig, session_start
from tests.console.conftest import Console, follow, shot
from tests.console.test_overview import v1
from tests.console.test_pages import XSS, dialogs
from tests.console.test_sign_in import sign_in

ZED = "people/cw2c-zed"
YARA = "people/cw2c-yara"


@pytest.fixture(scope="module")
def seeded(serve_console: Console) -> Console:
    w = serve_console.write
    zed = f"---\ntitle: Zed Cw2c\nsummary: Zed {XSS} builds boats.\n---\nZ\n"
    v1(serve_console, w, "put_page", slug=ZED, content=zed)
    v1(serve_console, w, "put_page", slug=YARA, content="---\ntitle: Yara Cw2c\nsummary: Yara sails.\n---\nY\n")
    for n in range(4):
        v1(
            serve_console,
            w,
            "remember",
            fact=f"Zed owns boat number {n} and keeps it in the north harbour",
            provenance="chat",
            entity=ZED,
        )
    return serve_console


class Lane:
    """The hook's lane, answering with what /v1 answers the same token."""

    remote = True

    def __init__(self, console: Console) -> None:
        self.console = console

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        r = httpx.post(
            f"{self.console.base}/v1/{tool}",
            json=arguments,
            headers={"Authorization": f"Bearer {self.console.read}"},
            timeout=60,
        )
        return SimpleNamespace(is_error=r.status_code != 200, body=r.json())


def hook_text(console: Console, entities: list[str], budget: int, tmp: Path, monkeypatch: Any) -> str | None:
    monkeypatch.setenv("FLEETMEM_STATE_DIR", str(tmp))
    cfg = ProjectConfig(entities=entities, budget_tokens=budget)
    return session_start({"session_id": "", "source": "startup"}, cfg, Lane(console), HookLog("SessionStart", ""))


def test_the_preview_is_the_hooks_own_text(page: Any, seeded: Console, tmp_path: Path, monkeypatch: Any) -> None:
    fired = dialogs(page)
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/context")
    page.get_by_label("Entities (slugs or names, comma-separated)").fill(f"{ZED}, Yara Cw2c")
    page.get_by_label("Budget (tokens)").fill("2000")
    follow(page, page.get_by_role("button", name="Preview"))
    shown = page.locator("pre#injected").text_content()
    expected = hook_text(seeded, [ZED, "Yara Cw2c"], 2000, tmp_path, monkeypatch)
    assert expected and shown == expected
    assert f"Zed {XSS} builds boats." in shown  # stored markup: text, not markup
    pack = v1(seeded, seeded.read, "context_pack", entities=f"{ZED},Yara Cw2c", budget_tokens=2000)
    assert f"{pack['budget_used']} of 2000 tokens" in page.locator("main").inner_text()
    assert "Nothing: everything fits." in page.locator("main").inner_text()
    shot(page, "context")
    assert fired == []


def test_a_small_budget_lists_what_it_cut(page: Any, seeded: Console, tmp_path: Path, monkeypatch: Any) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/context?entities={ZED}&budget=100")
    pack = v1(seeded, seeded.read, "context_pack", entities=ZED, budget_tokens=100)
    full = v1(seeded, seeded.read, "context_pack", entities=ZED)
    cut = [f["fact"] for f in full["facts"] if f["fact_id"] not in {g["fact_id"] for g in pack["facts"]}]
    assert cut  # the budget is small enough to drop facts
    listed = page.locator("section", has_text="Cut by the budget").inner_text()
    assert all(text in listed for text in cut)
    assert page.locator("pre#injected").text_content() == hook_text(seeded, [ZED], 100, tmp_path, monkeypatch)


@pytest.mark.parametrize("budget", ["0", "lots"])
def test_a_bad_budget_shows_context_packs_message_and_keeps_the_input(page: Any, seeded: Console, budget: str) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/context")
    page.get_by_label("Entities (slugs or names, comma-separated)").fill(ZED)
    page.get_by_label("Budget (tokens)").fill(budget)
    follow(page, page.get_by_role("button", name="Preview"))
    sent = int(budget) if budget.isdigit() else budget  # as the console sends it
    r = httpx.post(
        f"{seeded.base}/v1/context_pack",
        json={"entities": ZED, "budget_tokens": sent},
        headers={"Authorization": f"Bearer {seeded.read}"},
        timeout=60,
    )
    assert r.status_code == 400
    alert = page.get_by_role("alert").inner_text()
    assert "Not accepted." in alert and r.json()["message"] in alert
    assert page.get_by_label("Budget (tokens)").input_value() == budget
    assert page.get_by_label("Entities (slugs or names, comma-separated)").input_value() == ZED
    if budget == "0":
        shot(page, "context-refused")


def test_a_busiest_entity_can_be_picked(page: Any, seeded: Console, tmp_path: Path, monkeypatch: Any) -> None:
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/context")
    page.get_by_label(ZED, exact=True).check()  # among memory_stats' busiest entities (4 active facts)
    follow(page, page.get_by_role("button", name="Preview"))
    assert page.get_by_label(ZED, exact=True).is_checked()
    assert page.locator("pre#injected").text_content() == hook_text(seeded, [ZED], 2000, tmp_path, monkeypatch)


def test_the_previews_counts_are_the_injected_texts(
    page: Any, seeded: Console, tmp_path: Path, monkeypatch: Any
) -> None:
    """At a budget whose text holds the card but not every fact, the counts above the text, the cut
    list and the text agree (the preview once said "4 facts · 0 dropped … everything fits" over a
    text that showed one fact and "(3 more over the budget)")."""
    sign_in(page, seeded, seeded.read)
    page.goto(f"{seeded.base}/console/context?entities={ZED}&budget=100")
    shown = page.locator("pre#injected").text_content()
    assert shown == hook_text(seeded, [ZED], 100, tmp_path, monkeypatch)
    in_text = shown.count("- (fact [")
    left_out = 4 - in_text
    assert 1 <= in_text < 4  # the budget shows some of the four facts, not all
    counts = page.locator("section", has_text="Injected text").locator("p.muted").inner_text()
    assert f"1 cards · {in_text} facts · {left_out} dropped" in counts
    assert f"({left_out} more over the budget)" in shown
    cut = page.locator("section", has_text="Cut by the budget").locator("li")
    assert cut.count() == left_out
    assert all(cut.nth(i).inner_text().removeprefix("fact ") not in shown for i in range(left_out))
