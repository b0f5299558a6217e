"""The console on a phone, in the dark: every screen fits a 390 px wide viewport without scrolling
sideways (wide tables scroll inside their own box), and the dark palette is the one in use."""

from __future__ import annotations

from typing import Any

from tests.console.conftest import Console, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in

SCREENS = ["/", "/memories", "/pages", "/followers", "/context", "/tokens", "/entities/people/layout-ada"]


def test_every_screen_fits_a_phone_in_dark_mode(browser: Any, serve_console: Console) -> None:
    v1(
        serve_console,
        serve_console.write,
        "put_page",
        slug="people/layout-ada",
        content="---\ntitle: Ada Layout\ntype: person\n---\nAda runs a very long-named programme of work.\n",
    )
    v1(
        serve_console,
        serve_console.write,
        "remember",
        fact="Ada Layout prefers tea " + "and biscuits " * 12,
        provenance="a-rather-long-provenance-label/with/several/segments",
        entity="people/layout-ada",
    )
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True)
    try:
        page = context.new_page()
        sign_in(page, serve_console, serve_console.admin)
        for path in SCREENS:
            page.goto(f"{serve_console.base}/console{path}")
            wide = page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= 390, f"{path} is {wide} px wide on a 390 px phone"
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(17, 20, 24)"  # the dark palette's --bg
        page.goto(f"{serve_console.base}/console/memories")
        shot(page, "memories-phone-dark")
    finally:
        context.close()
