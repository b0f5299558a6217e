"""The console is a remote reader (D25): it reads through `/v1` with the signed-in token, so every
screen that shows fact or page text — the fact's detail, the memories list, a page, an entity's
card, the context pack — shows `<REDACTED:pattern>` in the browser, never the stored credential."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.conftest import Console, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in

AWS_KEY = "AKIAZ7Q2M4N8P1R5T9V3"
GITHUB = "ghp_" + "Xq7Lm2Pz9Rt4Vw8Ky3Nb6Hd1Gf5Js0Ca2Ue4"
SLUG = "people/rita-redaction"


@pytest.fixture(scope="module")
def fact_id(serve_console: Console) -> str:
    saved = v1(
        serve_console,
        serve_console.write,
        "remember",
        fact=f"Rita's deploy key is {AWS_KEY}",
        provenance=f"pasted with {GITHUB}",
        entity=SLUG,
        kind="commitment",
    )
    page = f"---\ntitle: Rita Redaction\ntype: person\n---\nRita deploys with {GITHUB} and {AWS_KEY}.\n"
    v1(serve_console, serve_console.write, "put_page", slug=SLUG, content=page)
    return str(saved["id"])


def test_no_console_screen_shows_a_stored_credential(page: Any, serve_console: Console, fact_id: str) -> None:
    sign_in(page, serve_console, serve_console.write)
    screens = {
        "fact": f"/console/facts/{fact_id}",
        "memories": f"/console/memories?entity={SLUG}",
        "page": f"/console/pages/{SLUG}",
        "entity": f"/console/entities/{SLUG}",
        "context": f"/console/context?entities={SLUG}",
    }
    for name, path in screens.items():
        response = page.goto(serve_console.base + path)
        assert response is not None and response.status == 200, name
        text = page.locator("body").inner_text()
        assert AWS_KEY not in text and GITHUB not in text, name
        assert "<REDACTED:" in text, name
        assert AWS_KEY not in page.content() and GITHUB not in page.content(), name
    shot(page, "redaction-context")
