"""Injective DynamoDB keys and the per-item tenant re-check (`fleetmem.adapters.aws.keys`).

The encoding is checked as a property (no DynamoDB needed). The isolation is checked on DynamoDB
Local, nothing mocked: tenant B's items are written twice per hostile value, through the stores for
tenant `a-b` (the value in every free-text field: session, entity, slug, title, alias, link
target, idempotency key, audit subject) and as the rows the key scheme before the escaping stored
for a tenant `a#b` (written directly: no path creates such a tenant any more). Tenant `a`, which
owns nothing, then reads through every read path of every store with the value itself and with
`b#` in front of it (what reached `a#b`'s keys before): nothing ever comes back. Tenant `a-b`
reads its own items back through the same paths, so the escaped keys, the keyset ranges and the
prefix rows still work.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.audit import audit_item
from fleetmem.adapters.aws.dynamo import to_ddb, ts
from fleetmem.adapters.aws.facts import fact_to_item
from fleetmem.adapters.aws.pages import page_to_item
from fleetmem.memory.slugs import alias_keys, last_segment, match_key, normalize_alias, title_keys
from fleetmem.models import AuditEvent, Cursor, Fact, IdempotencyRecord, Link, Page
from tests.aws import engines

A, B, LEGACY = "a", "a-b", "a#b"
#: now: a cursor's TTL (touched_at + 7 days) in the past would let DynamoDB Local delete it mid-test
T0 = datetime.now(UTC).replace(microsecond=0)
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
LATER = datetime(2030, 1, 1, tzinfo=UTC)

#: Separators, the escape, reserved names, unicode and empty-ish values.
SPECIALS = ["#", "%", "*", "~", "%23", "~chg", "~seq", "b#s", "a#b", "x*", " ", "#%*~", "北京#办公室", "é~", "-"]
HOSTILE = st.one_of(
    st.sampled_from(SPECIALS),
    st.text(alphabet=st.sampled_from(list("#%*~/ab -_é北\u00a0")), min_size=1, max_size=12),
)
EXAMPLES = settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def unescape(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        if part[i] == "%":
            out.append(chr(int(part[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(part[i])
            i += 1
    return "".join(out)


# -- the encoding ---------------------------------------------------------------------------------


@given(st.lists(HOSTILE | st.text(max_size=6), max_size=4))
@settings(max_examples=200, derandomize=True, database=None)
def test_a_key_splits_back_into_exactly_its_tenant_and_components(parts: list[str]) -> None:
    encoded = keys.key(B, *parts)
    tenant, *rest = encoded.split(keys.SEP)
    assert tenant == B and [unescape(p) for p in rest] == parts  # so two different keys never meet


@given(HOSTILE | st.text(max_size=8))
@settings(max_examples=200, derandomize=True, database=None)
def test_no_value_spells_a_counter_key_a_prefix_key_or_another_tenants_key(value: str) -> None:
    assert keys.key(A, value) not in {keys.reserved(A, keys.SEQ), keys.reserved(A, keys.CHANGE)}
    assert keys.key(A, value) != keys.prefix_key(A, value.rstrip("*"))
    assert not keys.key(A, value).startswith(LEGACY + keys.SEP)


@given(st.text(alphabet=st.characters(blacklist_characters="%#*~"), max_size=20))
@settings(max_examples=100, derandomize=True, database=None)
def test_a_value_without_the_escaped_characters_keys_exactly_as_before(value: str) -> None:
    assert keys.key(A, value) == f"{A}#{value}"
    assert keys.key(A, "c1", "remember", value) == f"{A}#c1#remember#{value}"


@pytest.mark.parametrize("tenant", ["a#b", "", "A", "a b", "a/b", "x" * 64, "-a"])
def test_a_tenant_outside_the_id_grammar_never_reaches_a_key(tenant: str) -> None:
    with pytest.raises(keys.InvalidTenant):
        keys.key(tenant, "s")
    with pytest.raises(keys.InvalidTenant):
        keys.reserved(tenant, keys.CHANGE)


# -- the stores on DynamoDB Local -----------------------------------------------------------------


@pytest.fixture(scope="module")
def stores(request: pytest.FixtureRequest) -> Iterator[Any]:
    with engines.scratch_stores(engines.dynamodb_local_endpoint(request.config)) as stores:
        yield stores


_N = itertools.count()


def fact(tenant: str, n: int, value: str) -> Fact:
    return Fact(
        tenant=tenant,
        fact_id=f"f_{n}",
        seq=n,
        text=f"secret of {tenant} {n}",
        entity_slug=value,
        provenance="t",
        session_id=value,
        client_id="writer",
        created_at=T0,
        valid_until=T0 + timedelta(days=1),
    )


def page(tenant: str, slug: str, value: str, *, links: tuple[Link, ...] = ()) -> Page:
    return Page(
        tenant=tenant,
        slug=slug,
        title=f"{value} title",
        aliases=(value,),
        body=f"secret of {tenant}",
        links=links,
        created_at=T0,
        updated_at=T0,
    )


def legacy(item: dict[str, Any], **attrs: str) -> dict[str, Any]:
    """A row as the key scheme before the escaping stored it for tenant `a#b`: raw values joined."""
    return {**item, "tenant": LEGACY, "tp": LEGACY, **{k: v for k, v in attrs.items()}}


def write_b(stores: Any, n: int, value: str) -> None:
    """Tenant B's items: through the stores for `a-b`, and `a#b`'s old-scheme rows directly."""
    db = stores.facts._db
    stores.facts.put(fact(B, n, value))
    stores.pages.put(page(B, value, value))
    stores.pages.put(page(B, f"src-{n}", value, links=(Link(target=value, type="related"),)))
    stores.cursors.put(
        Cursor(tenant=B, client_id=f"c{n}", session_id=value, since=T0, touched_at=T0), expected_version=None
    )
    stores.idempotency.claim(_claim(B, f"c{n}", value), now=T0)
    stores.audit.append(AuditEvent(tenant=B, subject=value, action="write", actor="writer", at=T0))

    old = f"{LEGACY}#"
    f = fact(B, n, value)
    db.put_item(
        TableName=stores.facts.table,
        Item=to_ddb(
            legacy(
                fact_to_item(f),
                pk=f"{old}f_{n}",
                ent=old + value,
                sess=old + value,
                xp=LEGACY,
            )
        ),
    )
    p = page(B, f"x{n}", value)
    pk = f"{old}{value}"
    head = {"slug": value, "title": p.title, "visibility": "world", "updated_at": ts(T0)}
    rows = [
        legacy(
            page_to_item(p),
            pk=pk,
            slug=value,
            tk=old + p.title.lower(),
            lk=old + last_segment(value),
            us=f"{ts(T0)}#{value}",
        ),
        {"pk": pk, "sk": f"A#{normalize_alias(value)}", "typ": "alias", "ak": old + normalize_alias(value), **head},
        {"pk": pk, "sk": f"L#{value}#related", "typ": "link", "gk": old + value, "src": f"x{n}", "ltype": "related"},
    ]
    for row in rows:
        db.put_item(TableName=stores.pages.table, Item=to_ddb(row))
    db.put_item(
        TableName=stores.cursors.table,
        Item=to_ddb(
            {
                "pk": f"{old}c{n}",
                "sk": value,
                "tenant": LEGACY,
                "client_id": f"c{n}",
                "since": ts(T0),
                "touched_at": ts(T0),
                "version": 1,
            }
        ),
    )
    rec = _claim(B, f"c{n}", value)
    db.put_item(
        TableName=stores.idempotency.table,
        Item=to_ddb(
            {
                "pk": f"{old}c{n}#remember#{value}",
                "tenant": LEGACY,
                "client_id": f"c{n}",
                "verb": "remember",
                "ikey": value,
                "request_hash": rec.request_hash,
                "result": '{"secret": "of a#b"}',
                "created_at": ts(T0),
                "expires_at": ts(LATER),
            }
        ),
    )
    event = AuditEvent(tenant=B, subject=value, action="write", actor="writer", at=T0)
    db.put_item(
        TableName=stores.audit.table,
        Item=to_ddb(
            {
                **audit_item(event),
                "pk": f"{old}{value}",
                "tenant": LEGACY,
            }
        ),
    )


def _claim(tenant: str, client: str, key: str) -> IdempotencyRecord:
    return IdempotencyRecord(
        tenant=tenant,
        client_id=client,
        verb="remember",
        key=key,
        request_hash="h",
        created_at=T0,
        expires_at=LATER,
        lease_until=T0 + timedelta(minutes=1),
        claim_id="c",
    )


def reads(stores: Any, tenant: str, n: int, value: str) -> dict[str, Any]:
    """Everything every read path of every store answers `tenant` for `value`."""
    f, p, everything = stores.facts, stores.pages, {"world_only": False}
    return {
        "facts.get": f.get(tenant, f"f_{n}"),
        "facts.many": f.many(tenant, [f"f_{n}", f"b#f_{n}"]),
        "facts.by_entity": stores.fact_listing.by_entity(tenant, value, now=T0, active_only=False, **everything),
        "facts.by_session": stores.fact_listing.by_session(tenant, value, now=T0, active_only=False, **everything),
        "facts.recent": stores.fact_listing.recent(tenant, now=T0, active_only=False, **everything),
        "facts.created_after": stores.fact_feed.created_after(
            tenant, after=EPOCH, after_seq=None, now=T0, **everything
        ),
        "facts.changed_after": stores.fact_feed.changed_after(tenant, seq=0, now=T0, retracted=True, **everything),
        "facts.expired_between": stores.fact_feed.expired_between(
            tenant, after=EPOCH, after_seq=None, until=LATER, **everything
        ),
        "facts.count_active": stores.fact_decisions.count_active(tenant, value, now=T0, world_only=False),
        "pages.get": p.get(tenant, value),
        "pages.heads": p.heads(tenant, [value]),
        "pages.lookup": p.lookup(
            tenant,
            aliases=alias_keys(value),
            titles=title_keys(f"{value} title"),
            slugs=[value],
            suffix=last_segment(value),
            **everything,
        ),
        "pages.list": stores.page_listing.list(tenant, limit=1000, **everything),
        "pages.backlinks": stores.page_listing.backlinks(tenant, value, **everything)[0],
        "pages.updated_since": stores.page_feed.updated_since(tenant, since=EPOCH, slug="", limit=1000, **everything),
        "pages.keyword": p.keyword(tenant, f"{value} title", **everything),
        "pages.changed_after": stores.page_feed.changed_after(tenant, seq=0, limit=1000, **everything),
        "cursors.get": stores.cursors.get(tenant, f"c{n}", value, now=T0),
        "audit.for_subject": stores.audit.for_subject(tenant, value),
    }


@pytest.mark.dynamodb_local
@given(value=HOSTILE)
@EXAMPLES
def test_no_read_of_tenant_a_ever_returns_an_item_of_another_tenant(stores: Any, value: str) -> None:
    n = next(_N)
    write_b(stores, n, value)
    for probe in (value, "b#" + value):
        leaked = {path: got for path, got in reads(stores, A, n, probe).items() if got}
        assert leaked == {}, f"tenant {A!r} read another tenant's items for {probe!r}"
        # the old attack on the idempotency table: `a` + client "b#c<n>" spelled `a#b`'s record key
        assert stores.idempotency.claim(_claim(A, f"b#c{n}", probe), now=T0) is None
        stores.idempotency.release(A, f"b#c{n}", "remember", probe)


@pytest.mark.dynamodb_local
@given(value=HOSTILE)
@EXAMPLES
def test_a_tenant_reads_back_its_own_items_stored_under_hostile_values(stores: Any, value: str) -> None:
    n = next(_N)
    write_b(stores, n, value)
    got = reads(stores, B, n, value)
    # (hypothesis may draw one value twice: earlier examples' items share its keys)
    assert f"f_{n}" in {x.fact_id for x in got["facts.by_session"]}
    assert f"f_{n}" in {x.fact_id for x in got["facts.by_entity"]} and got["facts.count_active"] >= 1
    assert got["facts.get"] is not None and got["facts.get"].session_id == value
    assert f"f_{n}" in {x.fact_id for x in got["facts.expired_between"]} | {x.fact_id for x in got["facts.recent"]}
    assert got["pages.get"] is not None and got["pages.get"].aliases == (value,)
    assert [h.slug for h in got["pages.heads"]] == [value]
    expected = {("title", value), ("slug", value)} | ({("alias", value)} if match_key(value) else set())
    assert {(m.via, m.page.slug) for m in got["pages.lookup"]} >= expected
    assert f"src-{n}" in {b.source for b in got["pages.backlinks"]}
    assert value in {h.slug for h in got["pages.updated_since"]} and value in {h.slug for h in got["pages.list"]}
    assert got["cursors.get"] is not None and got["cursors.get"].session_id == value
    assert got["audit.for_subject"] and {e.subject for e in got["audit.for_subject"]} == {value}
    # the keyset range on the escaped `us` still starts strictly after the position it is given
    after = stores.page_feed.updated_since(B, since=T0, slug=value, limit=1000, world_only=False)
    assert value not in {h.slug for h in after}
    replay = stores.idempotency.claim(_claim(B, f"c{n}", value), now=T0 + timedelta(seconds=1))
    assert replay is not None and replay.key == value


@pytest.mark.dynamodb_local
def test_the_old_attack_session_b_hash_s_does_not_read_tenant_a_hash_b(stores: Any) -> None:
    """Before: tenant `a` called recall(session_id "b#s") and got tenant `a#b`'s fact (`a#b#s`)."""
    n = next(_N)
    write_b(stores, n, "s")
    assert stores.fact_listing.by_session(A, "b#s", now=T0, world_only=False) == []
    assert stores.fact_listing.by_entity(A, "b#s", now=T0, world_only=False) == []


@pytest.mark.dynamodb_local
def test_an_item_under_the_callers_key_but_of_another_tenant_is_dropped_and_logged(
    stores: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The re-check on its own: rows keyed exactly as tenant `a`'s but storing tenant `a-b`."""
    n = next(_N)
    db = stores.facts._db
    item = {**fact_to_item(fact(A, n, f"s{n}")), "tenant": B}
    db.put_item(TableName=stores.facts.table, Item=to_ddb(item))
    row = {**page_to_item(page(A, f"p{n}", f"v{n}")), "tenant": B}
    db.put_item(TableName=stores.pages.table, Item=to_ddb(row))
    with caplog.at_level(logging.ERROR, logger="fleetmem.keys"):
        assert stores.facts.get(A, f"f_{n}") is None
        assert stores.facts.many(A, [f"f_{n}"]) == []
        assert stores.fact_listing.by_session(A, f"s{n}", now=T0, world_only=False) == []
        assert stores.pages.get(A, f"p{n}") is None and stores.pages.heads(A, [f"p{n}"]) == []
    dropped = [r for r in caplog.records if getattr(r, "event", "") == "foreign_item_dropped"]
    assert len(dropped) >= 5
    assert all("secret" not in r.getMessage() and f"s{n}" not in r.getMessage() for r in dropped)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("dynamodb-local", marks=pytest.mark.dynamodb_local)])
@pytest.mark.parametrize(("tenant", "client"), [("a#b", "c1"), ("a", "b#c"), ("A b", "c1")])
def test_a_stored_credential_with_an_id_outside_the_grammar_reads_as_an_invalid_token(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture, backend: str, tenant: str, client: str
) -> None:
    """A clients row made before the grammar was enforced (written directly: `create_client` refuses
    such ids) authenticates nobody; the reason is logged with the token's public id only."""
    from fleetmem.adapters.local import open_local
    from fleetmem.adapters.local.clock import FixedClock
    from fleetmem.models import ClientRecord
    from fleetmem.tokens import ApiTokenAuth, hash_token, mint_token, token_id_for

    store = (
        open_local(":memory:").clients
        if backend == "sqlite"
        else engines.open_stores(engines.dynamodb_local_endpoint(request.config), engines.fresh_prefix()).clients
    )
    auth = ApiTokenAuth(store, FixedClock(T0))

    def stored(tenant_id: str, client_id: str) -> str:
        token = mint_token()
        digest = hash_token(token)
        store.create(
            ClientRecord(
                token_hash=digest,
                token_id=token_id_for(digest),
                tenant=tenant_id,
                client_id=client_id,
                scopes=frozenset({"read"}),
                created_at=T0,
            )
        )
        return token

    bad, good = stored(tenant, client), stored("a", "c1")
    with caplog.at_level(logging.WARNING, logger="fleetmem.auth"):
        assert auth.verify(bad) is None
    caller = auth.verify(good)
    assert caller is not None and (caller.tenant, caller.client_id) == ("a", "c1")
    (logged,) = [r for r in caplog.records if getattr(r, "event", "") == "credential_id_invalid"]
    assert bad not in logged.getMessage() and getattr(logged, "token_id", "").startswith("tok_")
