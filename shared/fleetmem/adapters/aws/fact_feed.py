"""`FactFeed` on DynamoDB: what delta reads (change numbers, expiries, creations after a time)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime
from typing import Unpack

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.changes import PENDING, change_time, read_counter, settle_horizon
from fleetmem.adapters.aws.dynamo import answers, as_int, parallel, query_all, ts
from fleetmem.adapters.aws.fact_table import FactTable, fact_items, item_to_fact
from fleetmem.models import Fact
from fleetmem.ports.facts import FactChanges, FactChangesOptions, FactSince, FactSinceOptions


class DynamoFactFeed(FactTable):
    def created_after(self, tenant: str, *, now: datetime, **opts: Unpack[FactSinceOptions]) -> list[Fact]:
        q = FactSince.of(opts)
        # ck = "<created iso>#<seq:012d>": "~" sorts after every digit (created_at > after)
        start = f"{ts(q.after)}#" + ("~" if q.after_seq is None else f"{int(q.after_seq):012d}")
        req = self._index_request(
            "by_time",
            "tp = :k AND ck > :after",
            {":k": {"S": keys.tenant(tenant)}, ":after": {"S": start}},
            ScanIndexForward=True,
            Limit=self._page_size(q.limit),
        )
        horizon = settle_horizon(now, self.settle)
        settled: Iterator[Fact] = (item_to_fact(i) for i in fact_items(query_all(self._db, req), tenant))
        if horizon is not None:  # not settled: an earlier write may still be on its way into the index
            settled = itertools.takewhile(lambda f: f.created_at <= horizon, settled)
        return self._take(settled, now=now, active_only=True, world_only=q.world_only, limit=q.limit)

    def changed_after(self, tenant: str, **opts: Unpack[FactChangesOptions]) -> list[tuple[int, Fact]]:
        # D21: pending changes are numbered next to the listing (one concurrent round); without a
        # settle horizon (an index read as consistent) a pass that numbered something lists again,
        # so what it numbered is listed at once; with one, what it numbered has not settled yet
        # anyway and comes on a later wake
        q = FactChanges.of(opts)
        numbering, listed = parallel(
            [
                lambda: self._number(tenant, q.now),
                lambda: self._list_changes(tenant, q),
            ]
        )
        if numbering.fresh and settle_horizon(q.now, self.settle) is None:
            return self._list_changes(tenant, q)
        return listed

    def _list_changes(self, tenant: str, q: FactChanges) -> list[tuple[int, Fact]]:
        """Numbered changes only (`cs` below 2**53: a pending one is never a position), ascending."""
        seq, now, limit = q.seq, q.now, q.limit
        if int(seq) >= PENDING - 1:
            return []  # no number is above the largest position (and BETWEEN would be empty and refused)
        req = keys.numbered_changes(self.table, tenant, seq, page_size=self._page_size(limit))
        out_: list[tuple[int, Fact]] = []
        horizon = settle_horizon(now, self.settle)
        if limit <= 0:
            return out_
        for out in answers(self._db.query, req):
            for item in fact_items(out.get("Items", []), tenant):
                if horizon is not None and change_time(item, "created_at") > str(ts(horizon)):
                    return out_  # not settled: an earlier number may still be on its way into the index
                fact = item_to_fact(item)
                written_off = fact.expired_at is not None or fact.superseded_by is not None
                if not fact.is_active(now) and not (q.retracted and written_off):
                    continue  # (a TTL expiry alone is listed by expired_between)
                if q.world_only and fact.visibility != "world":
                    continue
                out_.append((as_int(item["cs"]), fact))
                if len(out_) >= limit:
                    return out_
        return out_

    def expired_between(self, tenant: str, *, until: datetime, **opts: Unpack[FactSinceOptions]) -> list[Fact]:
        q = FactSince.of(opts)
        if q.after > until:
            return []
        # xk = "<valid_until>#<seq:012d>"; "~" sorts after every digit (BETWEEN is inclusive)
        low = f"{ts(q.after)}#" + ("~" if q.after_seq is None else f"{int(q.after_seq) + 1:012d}")
        req = self._index_request(
            "by_expiry",
            "xp = :k AND xk BETWEEN :low AND :until",
            {":k": {"S": keys.tenant(tenant)}, ":low": {"S": low}, ":until": {"S": f"{ts(until)}#~"}},
            ScanIndexForward=True,
            Limit=self._page_size(q.limit),
        )
        found = (item_to_fact(item) for item in fact_items(query_all(self._db, req), tenant))
        return self._take(found, keep=_lapsed_in_place, world_only=q.world_only, limit=q.limit)

    def change_floor(
        self, tenant: str, *, after: datetime | None, walk: bool = False, after_seq: int | None = None
    ) -> int:
        # ck = "<created iso>#<seq:012d>"; "~" sorts after every digit (created_at > after)
        start = f"{ts(after)}#" + ("~" if after_seq is None else f"{int(after_seq):012d}")
        if walk and after is not None:
            self._number(tenant)
            top = read_counter(self._db, table=self.table, key=self._counter_key(tenant))
            req = self._index_request(
                "by_change",
                "tp = :k AND cs < :p",
                {":k": {"S": keys.tenant(tenant)}, ":p": {"N": str(PENDING)}},
                ScanIndexForward=True,
                Limit=100,
            )
            for item in fact_items(query_all(self._db, req), tenant):
                if f"{item.get('created_at', '')}#{as_int(item.get('seq')):012d}" > start:
                    return min(top, as_int(item["cs"]) - 1)
            return top
        since_query = None
        if after is not None:
            since_query = {
                "IndexName": "by_time",
                "KeyConditionExpression": "tp = :k AND ck > :after",
                "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":after": {"S": start}},
            }
        return self._floor(tenant, since_query)


def _lapsed_in_place(fact: Fact) -> bool:
    """Expired by its validity, not replaced by another fact (what `expired_between` lists)."""
    return fact.expired_at is None and fact.superseded_by is None
