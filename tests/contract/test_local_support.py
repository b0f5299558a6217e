"""The local adapters' small parts: clocks, sortable ids, the test-only hash embedder, conftest fixtures."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone

from fleetmem.adapters.local.clock import FixedClock, SystemClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.vectors import cosine
from fleetmem.ports import Deps


def test_system_clock_is_aware_utc_at_millisecond_precision():
    now = SystemClock().now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert now.microsecond % 1000 == 0


def test_fixed_clock_moves_only_when_told():
    start = datetime(2026, 6, 11, 11, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    c = FixedClock(start)
    assert c.now() == datetime(2026, 6, 11, 9, 30, 0, 123000, tzinfo=UTC)
    assert c.now() == c.now()
    assert c.advance(days=8, milliseconds=5) == datetime(2026, 6, 19, 9, 30, 0, 128000, tzinfo=UTC)
    c.set(datetime(2030, 1, 1, tzinfo=UTC))
    assert c.now() == datetime(2030, 1, 1, tzinfo=UTC)


def test_sortable_ids_are_unique_prefixed_and_ordered_by_mint_time():
    gen = SortableIds()
    ids = [gen.new_id("f") for _ in range(2000)]
    assert len(set(ids)) == 2000
    assert ids == sorted(ids)
    assert all(re.fullmatch(r"f_[0-9A-HJKMNP-TV-Z]{26}", i) for i in ids)
    assert gen.new_id("tok_").startswith("tok_") and not gen.new_id("tok_").startswith("tok__")


def test_hash_embedder_is_deterministic_unit_length_and_word_sensitive():
    e = HashEmbedder()
    assert (e.model_id, e.dim) == ("hash-384", 384)
    a, b, c, empty = e.embed(["Alice likes tea", "alice LIKES tea!", "Bob drives trucks", ""])
    assert a == b
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-9) for v in (a, c, empty))
    assert cosine(a, b) > 0.999
    assert cosine(a, c) < 0.5
    assert cosine(a, e.embed_one("Alice likes coffee")) > cosine(a, c)
    assert HashEmbedder(dim=16).embed(["x"])[0].__len__() == 16


def test_deps_fixtures_share_the_stores_and_the_clock(deps, deps_keyword_only, stores, clock):
    assert isinstance(deps, Deps)
    assert deps.facts is stores.facts and deps.search is stores.search and deps.clock is clock
    assert deps.embedder is not None and deps.embedder.model_id == "hash-384" and deps.llm is None
    assert deps_keyword_only.embedder is None and deps_keyword_only.diagnostics.embedder_problem
    assert clock.now() == datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def test_caller_fixtures_carry_the_agreed_identities(remote_caller, local_caller, admin_caller, other_tenant_caller):
    assert (remote_caller.tenant, remote_caller.client_id, remote_caller.remote) == ("t1", "agent-a", True)
    assert remote_caller.has_scope("write") and not remote_caller.has_scope("admin")
    assert (local_caller.client_id, local_caller.remote) == ("local", False)
    assert local_caller.has_scope("admin") and admin_caller.has_scope("admin")
    assert other_tenant_caller.tenant == "t2"
