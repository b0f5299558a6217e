"""DynamoDB's 400 KB item limit: a page too large for one item is refused with TooLarge before
anything is written (the page row and its derived rows stay as they were)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetmem.errors import TooLarge
from fleetmem.models import Page, TimelineEntry
from fleetmem.protocol import PAGE_BODY_MAX_BYTES
from tests.aws import engines

T0 = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def page(body: str, **kw) -> Page:
    return Page(tenant="t1", slug="notes/big", title="Big", body=body, created_at=T0, updated_at=T0, **kw)


@pytest.fixture
def pages(ddb_endpoint):
    with engines.scratch_stores(ddb_endpoint) as stores:
        yield stores.pages


def test_the_largest_body_the_domain_allows_is_stored(pages):
    body = "x" * (PAGE_BODY_MAX_BYTES - 1)
    pages.put(page(body))
    assert pages.get("t1", "notes/big").body == body


def test_a_page_over_the_item_limit_is_refused_and_nothing_changes(pages):
    pages.put(page("small", aliases=("Bigly",)))
    timeline = tuple(TimelineEntry(date="2026-06-01", text="y" * 1000) for _ in range(80))
    with pytest.raises(TooLarge):
        pages.put(page("x" * (PAGE_BODY_MAX_BYTES - 1), timeline=timeline, aliases=("Other",)))
    stored = pages.get("t1", "notes/big")
    assert stored.body == "small" and stored.aliases == ("Bigly",)
    assert [
        m.page.slug for m in pages.lookup("t1", aliases=["bigly"], titles=(), slugs=(), suffix="", world_only=True)
    ] == ["notes/big"]
