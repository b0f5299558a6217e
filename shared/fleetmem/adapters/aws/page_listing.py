"""`PageListing` on DynamoDB: list_pages, memory_stats and backlinks."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Unpack

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import ts
from fleetmem.adapters.aws.page_table import MENTION_TYPES, PAGE_SK, PageTable
from fleetmem.models import Backlink, PageHead
from fleetmem.ports import PageTallies
from fleetmem.ports.pages import PageList, PageListOptions, Referring


class DynamoPageListing(PageTable):
    def list(self, tenant: str, **opts: Unpack[PageListOptions]) -> builtins.list[PageHead]:
        q = PageList.of(opts)
        return self._by_slug(tenant, world_only=q.world_only, limit=q.limit, after=q.after, type=q.type)

    def tallies(self, tenant: str, *, world_only: bool, since: datetime) -> PageTallies:
        """One paginated Query of the tenant's `by_change` range (page heads; tombstones skipped;
        pages from before change numbers get into it with `fleetmem admin reindex`)."""
        count = 0
        per_day: dict[str, int] = {}
        day0 = str(ts(since))[:10]
        for item in self._query(tenant, self._tenant_range("by_change", tenant)):
            if item.get("sk") != PAGE_SK or not self._visible(item, world_only):
                continue
            count += 1
            day = str(item.get("updated_at", ""))[:10]
            if day >= day0:
                per_day[day] = per_day.get(day, 0) + 1
        return PageTallies(pages=count, per_day=per_day)

    def backlinks(
        self, tenant: str, slug: str, *, world_only: bool, limit: int = 10
    ) -> tuple[builtins.list[Backlink], int]:
        found = self.referring(tenant, slug, world_only=world_only, limit=limit)
        return found.links, found.link_count

    def referring(self, tenant: str, slug: str, *, world_only: bool, limit: int = 10) -> Referring:
        # one paginated Query of the target's link rows answers all three
        links: builtins.list[Backlink] = []
        count = 0
        newest: dict[str, str] = {}
        for item in self._gsi(tenant, "by_target", "gk", keys.key(tenant, slug)):
            if item.get("src") == slug:
                continue
            if world_only and item.get("src_visibility", "world") != "world":
                continue
            if item.get("ltype") not in MENTION_TYPES:
                count += 1
            if len(links) < limit:
                links.append(
                    Backlink(source=item["src"], type=item.get("ltype", "related"), context=item.get("context"))
                )
            src, at = str(item["src"]), str(item.get("src_updated_at", ""))
            newest[src] = max(at, newest.get(src, ""))
        sources = sorted(newest, key=lambda s: (newest[s], s), reverse=True)
        return Referring(links=links, link_count=count, sources=sources)
