"""The composition root: local stores + the configured embedder, cached per settings, injectable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetmem import wiring
from fleetmem.adapters.aws.facts import DynamoFactStore
from fleetmem.adapters.local.sqlite.facts import SqliteFactStore
from fleetmem.config import AwsSettings, BedrockSettings, Settings
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    wiring.clear_cache()
    yield
    wiring.set_deps_override(None)
    wiring.clear_cache()


def settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(data_dir=tmp_path / "data", model_dir=tmp_path / "models", **kw)  # type: ignore[arg-type]


def test_the_local_backend_opens_a_working_store_in_the_data_dir(tmp_path: Path) -> None:
    deps = wiring.build_deps(settings(tmp_path, embedder="hash"))
    assert isinstance(deps.facts, SqliteFactStore)
    assert deps.maintenance is not None  # `fleetmem reindex` works here
    assert deps.embedder is not None and deps.embedder.model_id == "hash-384"
    who = Caller(tenant="t1", client_id="a", scopes=frozenset({"write"}))
    r = dispatch("remember", {"fact": "Alice prefers tea", "provenance": "chat", "entity": "Alice"}, who, deps)
    assert not r.is_error
    assert any((tmp_path / "data").iterdir())


def test_no_llm_is_configured_locally_and_the_problem_says_how(tmp_path: Path) -> None:
    deps = wiring.build_deps(settings(tmp_path, embedder="hash"))
    assert deps.llm is None
    assert deps.diagnostics.llm_problem


def test_embedder_none_means_keyword_only_with_a_stated_problem(tmp_path: Path) -> None:
    deps = wiring.build_deps(settings(tmp_path, embedder="none"))
    assert deps.embedder is None
    assert deps.diagnostics.embedder_problem


def test_an_unbuilt_minilm_model_degrades_to_no_embedder_with_its_problem(tmp_path: Path) -> None:
    deps = wiring.build_deps(settings(tmp_path, embedder="minilm"))
    assert deps.embedder is None
    assert deps.diagnostics.embedder_problem


def test_deps_are_built_once_per_settings(tmp_path: Path) -> None:
    s = settings(tmp_path, embedder="hash")
    assert wiring.build_deps(s) is wiring.build_deps(s)
    assert wiring.build_deps(s) is not wiring.build_deps(settings(tmp_path / "other", embedder="hash"))


def test_an_override_replaces_the_wiring(tmp_path: Path, deps: Deps) -> None:
    wiring.set_deps_override(deps)
    assert wiring.build_deps(settings(tmp_path)) is deps


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        wiring.build_deps(settings(tmp_path, backend="nope"))


def test_the_aws_backend_wires_dynamodb_stores_and_bedrock_without_connecting(tmp_path: Path) -> None:
    deps = wiring.build_deps(settings(tmp_path, backend="aws", aws=AwsSettings(region="eu-west-1"), embedder="bedrock"))
    assert isinstance(deps.facts, DynamoFactStore)
    assert deps.maintenance is None  # the stream indexer embeds every write
    assert deps.embedder is not None and deps.embedder.model_id == Settings().bedrock.embedding_model
    assert deps.llm is None and deps.diagnostics.llm_problem


def test_the_aws_backend_uses_bedrock_for_synthesis_when_a_model_is_configured(tmp_path: Path) -> None:
    s = settings(
        tmp_path,
        backend="aws",
        aws=AwsSettings(region="eu-west-1"),
        embedder="bedrock",
        llm="bedrock",
        bedrock=BedrockSettings(llm_model="test-model"),
    )
    deps = wiring.build_deps(s)
    assert deps.llm is not None and deps.llm.model_id == "test-model"
    assert deps.diagnostics.llm_problem is None


def test_the_aws_backend_can_run_with_a_local_embedder(tmp_path: Path) -> None:
    """DynamoDB + OpenSearch with the hashing embedder (how the local engine suites run it)."""
    deps = wiring.build_deps(settings(tmp_path, backend="aws", aws=AwsSettings(region="eu-west-1"), embedder="hash"))
    assert isinstance(deps.facts, DynamoFactStore)
    assert deps.embedder is not None and deps.embedder.model_id == "hash-384"
