"""The `pages` tables every SQLite page role reads: the row mapping and `SqlitePageTable`, the base
the role stores (`pages`, `page_feed`, `page_listing`) share."""

from __future__ import annotations

import json
import re

from fleetmem.adapters.local.sqlite.db import (
    Database,
    dt_of,
    dt_opt,
    row_model,
)
from fleetmem.models import (
    Link,
    Page,
    PageHead,
    TimelineEntry,
)

_HEAD_COLS = "slug, title, type, visibility, updated_at, last_retrieved_at"

_PAGE_COLS = (
    "tenant, slug, title, type, aliases, summary, visibility, body, links, timeline, frontmatter, "
    "created_at, updated_at, last_retrieved_at, author"
)

_WORD = re.compile(r"\w+")

_head_of = row_model(PageHead, _HEAD_COLS, updated_at=dt_of, last_retrieved_at=dt_opt)

_page_of = row_model(
    Page,
    _PAGE_COLS,
    aliases=lambda v: tuple(json.loads(v)),
    links=lambda v: tuple(Link(**x) for x in json.loads(v)),
    timeline=lambda v: tuple(TimelineEntry(**x) for x in json.loads(v)),
    frontmatter=json.loads,
    created_at=dt_of,
    updated_at=dt_of,
    last_retrieved_at=dt_opt,
)


class SqlitePageTable:
    """One role over the `pages` tables."""

    def __init__(self, db: Database) -> None:
        self.db = db
