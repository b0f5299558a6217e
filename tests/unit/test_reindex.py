"""The pure parts of the search index rebuild (`fleetmem.adapters.aws.reindex`, the alias steps
of `fleetmem.adapters.aws.opensearch`) and the replica setting."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetmem.adapters.aws.opensearch_bodies import alias_name, index_body, index_name, rebuild_name, swap_actions
from fleetmem.adapters.aws.reindex import Checkpoint, Pace, StateFile, fact_docs
from fleetmem.config import ENV_OPENSEARCH_REPLICAS, Settings
from fleetmem.models import Fact

T = datetime(2026, 1, 2, tzinfo=UTC)


def test_the_swap_moves_the_alias_in_one_step_keeping_or_dropping_the_old_index() -> None:
    assert swap_actions("a-live", "a-2", ["a"], drop_old=False) == [
        {"remove": {"index": "a", "alias": "a-live"}},
        {"add": {"index": "a-2", "alias": "a-live"}},
    ]
    assert swap_actions("a-live", "a-2", ["a"], drop_old=True) == [
        {"remove_index": {"index": "a"}},
        {"add": {"index": "a-2", "alias": "a-live"}},
    ]
    assert swap_actions("a-live", "a-2", [], drop_old=True) == [{"add": {"index": "a-2", "alias": "a-live"}}]
    assert swap_actions("a-live", "a-2", ["a-2"], drop_old=True) == [{"add": {"index": "a-2", "alias": "a-live"}}]


def test_names_of_the_alias_and_of_a_rebuild_keep_the_model_and_version() -> None:
    assert alias_name("p", "Model X", 8) == "p-docs-model-x-8-v2-live"
    assert rebuild_name(alias_name("p", "m", 8), "20260102t030405") == "p-docs-m-8-v2-20260102t030405"
    assert rebuild_name(alias_name("p", "m", 8), "x").startswith(index_name("p", "m", 8))


def test_index_body_carries_the_replicas_and_the_alias_only_when_given() -> None:
    plain = index_body(8)
    assert "number_of_replicas" not in plain["settings"]["index"] and "aliases" not in plain
    body = index_body(8, replicas=1, alias="a")
    assert body["settings"]["index"]["number_of_replicas"] == 1 and body["aliases"] == {"a": {}}
    assert body["mappings"] == plain["mappings"]


def test_the_replica_setting_defaults_to_zero_and_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_OPENSEARCH_REPLICAS, raising=False)
    assert Settings.from_env().search.replicas == 0
    monkeypatch.setenv(ENV_OPENSEARCH_REPLICAS, "2")
    assert Settings.from_env().search.replicas == 2
    monkeypatch.setenv(ENV_OPENSEARCH_REPLICAS, "-1")
    with pytest.raises(ValueError, match=f"{ENV_OPENSEARCH_REPLICAS} must be a whole number"):
        Settings.from_env()


def test_pace_asks_to_wait_for_the_documents_already_sent() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    pace = Pace(10, clock=lambda: now[0], sleep=sleep)
    pace.take(5)  # the first batch goes at once
    pace.take(5)  # 5 docs at 10/s: half a second later
    pace.take(10)
    assert waits == [0.5, 0.5]
    unlimited = Pace(0, clock=lambda: now[0], sleep=sleep)
    unlimited.take(1000)
    assert waits == [0.5, 0.5]


def test_written_off_facts_get_no_document() -> None:
    def fact(fid: str, **kw: object) -> Fact:
        return Fact(tenant="t", fact_id=fid, seq=1, text=fid, provenance="p", client_id="c", created_at=T, **kw)  # type: ignore[arg-type]

    keep, gone = fact_docs([fact("a"), fact("b", expired_at=T), fact("c", superseded_by="a")])
    assert [d.doc_id for d in keep] == ["fact:a"] and gone == ["fact:b", "fact:c"]


def test_the_checkpoint_survives_a_round_trip(tmp_path) -> None:
    state = StateFile(tmp_path / "s" / "state.json")
    assert state.load() is None
    point = Checkpoint(
        alias="a",
        target="a-1",
        started_at=T.isoformat(),
        tenants=["t"],
        totals={"t": 3},
        floors={"t": {"facts": 4, "pages": 1}},
        copied=2,
        after="x",
    )
    state.save(point)
    assert state.load() == point
