"""`PageListing` on DynamoDB: list_pages, memory_stats and backlinks."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Unpack

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import parse_ts, ts
from fleetmem.adapters.aws.page_table import HEAD_PROJECTION, MENTION_TYPES, PAGE_SK, PageTable, item_to_head
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
        # one paginated Query of the target's link rows answers all three; a link row carries its
        # page's head (D35), so no page is read for it; only link rows written before they did are
        # followed by one batched head read of their pages
        links: builtins.list[Backlink] = []
        count = 0
        heads: dict[str, PageHead] = {}
        unread: set[str] = set()
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
            src = str(item["src"])
            if "src_title" in item and "src_ptype" in item:
                heads[src] = PageHead(
                    slug=src,
                    title=item["src_title"],
                    type=item["src_ptype"] or None,
                    visibility=item.get("src_visibility", "world"),
                    updated_at=parse_ts(item["src_updated_at"]),  # type: ignore[arg-type]
                )
            else:
                unread.add(src)
        unread -= heads.keys()
        if unread:
            found = [
                item_to_head(i) for i in self._batch_items(tenant, sorted(unread), HEAD_PROJECTION + ", pk, tenant")
            ]
            heads.update((h.slug, h) for h in found if not (world_only and h.visibility != "world"))
        return Referring.of_heads(links, count, builtins.list(heads.values()))
