"""What the DynamoDB page store writes besides a put or a delete of one page: the derived and name
rows of many items at once (`_write`, `_update_each`, `_check_page`, shared with `pages.put` and
`pages.delete`) and the name-item backfill `fleetmem admin reindex` runs (D24)."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Sequence
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import call, chunks, from_ddb, parallel, parse_ts, to_ddb, translate_client_error
from fleetmem.adapters.aws.page_table import (
    NAME_MARK,
    PAGE_SK,
    TX_MAX,
    PageTable,
    derived_rows,
    name_updates,
    parse_mark,
)
from fleetmem.errors import Conflict
from fleetmem.models import Page


class PageUpkeep(PageTable):
    def _update_each(self, actions: builtins.list[dict[str, Any]]) -> None:
        for action in actions:
            call(self._db.update_item, **action["Update"])

    def _check_page(self, pk: str, condition: dict[str, Any]) -> None:
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table,
                            "Key": to_ddb({"pk": pk, "sk": PAGE_SK}),
                            **condition,
                        }
                    }
                ]
            )
        except Exception as exc:
            raise translate_client_error(exc) from None

    def _write(self, puts: builtins.list[dict[str, Any]], deletes: builtins.list[dict[str, str]]) -> None:
        if len(puts) + len(deletes) <= TX_MAX:
            actions: builtins.list[dict[str, Any]] = [
                {"Delete": {"TableName": self.table, "Key": to_ddb(k)}} for k in deletes
            ]
            actions += [{"Put": {"TableName": self.table, "Item": to_ddb(p)}} for p in puts]
            call(self._db.transact_write_items, TransactItems=actions)
            return
        requests = [{"DeleteRequest": {"Key": to_ddb(k)}} for k in deletes]
        requests += [{"PutRequest": {"Item": to_ddb(p)}} for p in puts]
        for group in chunks(requests, 25):
            pending: dict[str, Any] = {self.table: list(group)}
            while pending:
                out = call(self._db.batch_write_item, RequestItems=pending)
                pending = out.get("UnprocessedItems") or {}

    def backfill_names(self, tenant: str, *, progress: Callable[[str], None] = lambda _line: None) -> int:
        """D24: give the tenant's pages written before name items (or word-prefix rows) existed
        their name marker rows, name items and `X#` prefix rows (`fleetmem admin reindex`), as
        their next put would; returns how many pages got some. Pages that have them are left
        alone, so a second run writes nothing. One Query of the page rows, a BatchGetItem of their
        expected rows per 100 pages, one transaction per page that lacks some (conditional on the
        page's `updated_at`: a page written meanwhile got its rows from its own put and is skipped)."""
        attrs = ("pk", "sk", "tenant", "slug", "title", "aliases", "ptype", "visibility", "updated_at")
        req = self._tenant_range(
            "by_slug",
            tenant,
            values={":p": {"S": PAGE_SK}},
            FilterExpression="#sk = :p",
            ProjectionExpression=", ".join(f"#{a}" for a in (*attrs, "last_retrieved_at")),
            ExpressionAttributeNames={f"#{a}": a for a in (*attrs, "last_retrieved_at")},
        )
        rows = keys.owned_items(self._query_raw(req), tenant, table="pages")
        checked = given = 0
        for group in chunks(builtins.list(rows), 100):
            wanted = {str(r["pk"]): (r, self._name_rows(tenant, r)) for r in group}
            have = {
                (str(i["pk"]), str(i["sk"]))
                for i in self._items_at([(pk, sk) for pk, (_, m) in wanted.items() for sk in m])
            }
            for pk, (row, expected) in wanted.items():
                missing = [r for sk, r in expected.items() if (pk, sk) not in have]
                if missing and self._mark(tenant, pk, row, missing):
                    given += 1
            checked += len(group)
            progress(f"names: {tenant}: {checked} page(s) checked, {given} given their name and prefix rows")
        return given

    @staticmethod
    def _name_rows(tenant: str, row: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """sk -> row of the name marker and `X#` prefix rows a put of the page row `row` writes."""
        at = parse_ts(row["updated_at"])
        page = Page(
            tenant=tenant,
            slug=str(row["slug"]),
            title=str(row["title"]),
            type=row.get("ptype"),
            aliases=tuple(str(a) for a in row.get("aliases") or ()),
            visibility=row.get("visibility", "world"),
            created_at=at,  # type: ignore[arg-type]
            updated_at=at,  # type: ignore[arg-type]
            last_retrieved_at=parse_ts(row.get("last_retrieved_at")),
        )
        return {r["sk"]: r for r in derived_rows(page) if str(r["sk"]).startswith((NAME_MARK, "X#"))}

    def _items_at(self, item_keys: builtins.list[tuple[str, str]]) -> builtins.list[dict[str, Any]]:
        """The items that exist at (pk, sk) (BatchGetItem, 100 keys a request, concurrently)."""

        def fetch(group: Sequence[tuple[str, str]]) -> builtins.list[dict[str, Any]]:
            pending: dict[str, Any] = {
                self.table: {
                    "Keys": [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in group],
                    "ProjectionExpression": "pk, sk",
                    "ConsistentRead": True,
                }
            }
            raws: builtins.list[dict[str, Any]] = []
            while pending:
                out = call(self._db.batch_get_item, RequestItems=pending)
                raws += [from_ddb(i) or {} for i in out.get("Responses", {}).get(self.table, [])]
                pending = out.get("UnprocessedKeys") or {}
            return raws

        return [i for g in parallel([functools.partial(fetch, g) for g in chunks(item_keys, 100)]) for i in g]

    def _mark(self, tenant: str, pk: str, row: dict[str, Any], missing: builtins.list[dict[str, Any]]) -> bool:
        """Write a page's missing name marker and prefix rows and add it to the name items of the
        marks; False when the page changed (or went) since it was read."""
        condition = {
            "ConditionExpression": "updated_at = :u",
            "ExpressionAttributeValues": {":u": {"S": str(row["updated_at"])}},
        }
        marks = [m for m in (parse_mark(str(r["sk"])) for r in missing) if m is not None]
        names = name_updates(self.table, tenant, str(row["slug"]), marks, [])
        try:
            if len(missing) + len(names) + 1 > TX_MAX:  # a page with very many names: not atomic
                self._check_page(pk, condition)
                self._write(missing, [])
                self._update_each(names)
                return True
            check = {"ConditionCheck": {"TableName": self.table, "Key": to_ddb({"pk": pk, "sk": PAGE_SK}), **condition}}
            actions = [{"Put": {"TableName": self.table, "Item": to_ddb(r)}} for r in missing]
            call(self._db.transact_write_items, TransactItems=[*actions, *names, check])
        except Conflict:
            return False
        return True
