"""`PageFeed` on DynamoDB: what delta reads (page change numbers, tombstones, updates after a position)."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Unpack

from fleetmem.adapters.aws import changes, keys
from fleetmem.adapters.aws.dynamo import as_int, parallel, ts
from fleetmem.adapters.aws.page_table import PAGE_SK, TOMBSTONE_SK, PageTable, item_to_head, us_position
from fleetmem.models import PageHead, PageTombstone
from fleetmem.ports.pages import PageSince, PageSinceOptions


class DynamoPageFeed(PageTable):
    def updated_since(self, tenant: str, **opts: Unpack[PageSinceOptions]) -> builtins.list[PageHead]:
        q = PageSince.of(opts)
        out: builtins.list[PageHead] = []
        if q.limit <= 0:
            return out
        horizon = changes.settle_horizon(q.now, self.settle)
        for item in self._gsi(
            tenant, "by_updated", "tp", keys.tenant(tenant), sort=("us", ">", us_position(q.since, q.slug))
        ):
            if horizon is not None and item.get("updated_at", "") > ts(horizon):
                break  # not settled: an earlier write may still be on its way into the index
            if not self._visible(item, q.world_only):
                continue
            out.append(item_to_head(item))
            if len(out) >= q.limit:
                break
        return out

    def changed_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None = None
    ) -> builtins.list[tuple[int, PageHead]]:
        return self._numbered_changes(tenant, seq=seq, world_only=world_only, limit=limit, now=now, sk=PAGE_SK)

    def _numbered_changes(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None, sk: str
    ) -> builtins.list[tuple[int, PageHead]]:
        """D21: pending changes numbered next to the listing (one concurrent round). Without a settle
        horizon (an index read as consistent) a pass that numbered something lists again, so what
        it numbered is listed at once — cut before the first change of the OTHER kind it numbered
        (a tombstone for the page list, a page for the tombstone list): the parallel listing of
        that kind ran before the numbering, and delta merges both into one position, which must not
        pass a change neither list showed. With a horizon, what it numbered has not settled yet."""
        numbering, listed = parallel(
            [
                lambda: self._number(tenant, now),
                lambda: self._changes(tenant, seq=seq, world_only=world_only, limit=limit, now=now, sk=sk),
            ]
        )
        if not numbering.fresh or changes.settle_horizon(now, self.settle) is not None:
            return listed
        again = self._changes(tenant, seq=seq, world_only=world_only, limit=limit, now=now, sk=sk)
        other = [n for n, item in numbering.fresh.values() if item.get("sk", {}).get("S", PAGE_SK) != sk]
        return [(n, h) for n, h in again if n < min(other)] if other else again

    def _changes(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None, sk: str
    ) -> builtins.list[tuple[int, PageHead]]:
        """`by_change` entries of page rows (`sk` "P") or tombstones ("T"), which share the index."""
        out: builtins.list[tuple[int, PageHead]] = []
        if limit <= 0 or int(seq) >= changes.PENDING - 1:
            return out  # nothing is numbered above the largest position (BETWEEN would be refused)
        horizon = changes.settle_horizon(now, self.settle)
        req = keys.numbered_changes(self.table, tenant, seq, page_size=max(10, min(limit * 2, 500)))
        for item in self._query(tenant, req):
            if horizon is not None and changes.change_time(item, "updated_at") > str(ts(horizon)):
                break  # not settled: an earlier number may still be on its way into the index
            if item.get("sk", PAGE_SK) != sk or not self._visible(item, world_only):
                continue
            out.append((as_int(item["cs"]), item_to_head(item)))
            if len(out) >= limit:
                break
        return out

    def change_floor(self, tenant: str, *, since: datetime | None, slug: str = "", walk: bool = False) -> int:
        if walk and since is not None:
            self._number(tenant)
            top = changes.read_counter(self._db, table=self.table, key=self._counter_key(tenant))
            position = us_position(since, slug)
            for n, head in self._changes(tenant, seq=0, world_only=False, limit=top + 1, now=None, sk=PAGE_SK):
                if us_position(head.updated_at, head.slug) > position:
                    return min(top, n - 1)
            return top
        since_query = None
        if since is not None:
            since_query = {
                "IndexName": "by_updated",
                "KeyConditionExpression": "tp = :k AND us > :s",
                "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":s": {"S": us_position(since, slug)}},
            }
        return self._floor(tenant, since_query)

    def deleted_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int
    ) -> builtins.list[tuple[int, PageTombstone]]:
        return [
            (n, PageTombstone(slug=h.slug, visibility=h.visibility, deleted_at=h.updated_at))
            for n, h in self._numbered_changes(
                tenant, seq=seq, world_only=world_only, limit=limit, now=None, sk=TOMBSTONE_SK
            )
        ]
