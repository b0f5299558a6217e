"""AWS adapter set: DynamoDB stores, the OpenSearch index and Bedrock models behind the ports.

`open_aws(settings)` builds every store without connecting (clients are created on first use).
Nothing in this package is imported by the domain; `fleetmem.wiring` is the only caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetmem.config import Settings
from fleetmem.ports import Ports, SearchIndex


class NoSearchIndex:
    """The SearchIndex when no OpenSearch endpoint is configured. Writes are dropped (there is no
    index to keep current); a search raises Unavailable naming the missing setting, because
    answering "nothing found" would hide a configuration gap."""

    write_through = False
    problem = "no OpenSearch endpoint is configured (set FLEETMEM_OPENSEARCH_ENDPOINT)"

    def upsert(self, docs: Any) -> None:
        return None

    def delete(self, tenant: str, doc_ids: Any) -> None:
        return None

    def delete_page(self, tenant: str, slug: str) -> None:
        return None

    def write(self, upserts: Any, deletes: Any) -> set[str]:
        return set()

    def replace_page(self, tenant: str, slug: str, docs: Any) -> None:
        return None

    def search(self, query: Any) -> Any:
        from fleetmem.errors import Unavailable

        raise Unavailable(self.problem, reason="not_configured")

    def search_many(self, queries: Any) -> Any:
        return [self.search(q) for q in queries]

    def health_problem(self) -> str | None:
        """`SearchHealth`: every search fails until an endpoint is configured."""
        return f"search is unavailable: {self.problem}"


@dataclass(kw_only=True, eq=False)
class AwsStores(Ports):
    """The ports over AWS (like `LocalStores`). No re-embedding queries: the stream indexer embeds
    every write."""

    aws: Any = field(repr=False, default=None)  # the AwsClients the stores share

    def close(self) -> None:
        return None


def open_aws(
    settings: Settings,
    *,
    session: Any = None,
    dynamodb_endpoint: str | None = None,
    clients: dict[str, Any] | None = None,
    search_model_id: str | None = None,
    search_dim: int | None = None,
    search_client: Any = None,
) -> AwsStores:
    """Build the AWS stores from settings. Keyword arguments exist for tests and local engines:
    an injected boto3 session/clients, a DynamoDB endpoint (otherwise boto3's own
    `AWS_ENDPOINT_URL_DYNAMODB` applies), and the embedding model the search index is keyed by
    (default: the configured Bedrock model and dimension)."""
    from fleetmem.adapters.aws.audit import DynamoAuditLog
    from fleetmem.adapters.aws.clients import DynamoClientStore
    from fleetmem.adapters.aws.cursors import DynamoCursorStore
    from fleetmem.adapters.aws.dynamo import AwsClients
    from fleetmem.adapters.aws.fact_decisions import DynamoFactDecisions
    from fleetmem.adapters.aws.fact_feed import DynamoFactFeed
    from fleetmem.adapters.aws.fact_listing import DynamoFactListing
    from fleetmem.adapters.aws.facts import DynamoFactStore
    from fleetmem.adapters.aws.idempotency import DynamoIdempotencyStore
    from fleetmem.adapters.aws.page_feed import DynamoPageFeed
    from fleetmem.adapters.aws.page_listing import DynamoPageListing
    from fleetmem.adapters.aws.pages import DynamoPageStore

    endpoints = {"dynamodb": dynamodb_endpoint} if dynamodb_endpoint else {}
    aws = AwsClients(region=settings.aws.region, session=session, endpoints=endpoints, clients=clients)
    prefix = settings.aws.table_prefix
    search: SearchIndex
    if settings.search.endpoint:
        from fleetmem.adapters.aws.opensearch import OpenSearchIndex

        search = OpenSearchIndex(
            settings.search.endpoint,
            model_id=search_model_id or settings.bedrock.embedding_model,
            dim=search_dim or settings.bedrock.embedding_dim,
            prefix=settings.search.index_prefix,
            service=settings.search.service,
            region=settings.aws.region,
            session=session,
            client=search_client,
            write_through=settings.search.write_through,
            replicas=settings.search.replicas,
        )
    else:
        search = NoSearchIndex()
    settle_ms = settings.aws.change_settle_ms
    return AwsStores(
        facts=DynamoFactStore(aws, prefix, settle_ms=settle_ms),
        fact_decisions=DynamoFactDecisions(aws, prefix, settle_ms=settle_ms),
        fact_feed=DynamoFactFeed(aws, prefix, settle_ms=settle_ms),
        fact_listing=DynamoFactListing(aws, prefix, settle_ms=settle_ms),
        pages=DynamoPageStore(aws, prefix, settle_ms=settle_ms),
        page_feed=DynamoPageFeed(aws, prefix, settle_ms=settle_ms),
        page_listing=DynamoPageListing(aws, prefix, settle_ms=settle_ms),
        cursors=DynamoCursorStore(aws, prefix),
        clients=DynamoClientStore(aws, prefix),
        idempotency=DynamoIdempotencyStore(aws, prefix),
        audit=DynamoAuditLog(aws, prefix),
        search=search,
        aws=aws,
    )


_shared_clients: dict[str, Any] = {}


def sdk_client(purpose: str, *, region: str = "", read_timeout: float | None = None) -> Any:
    """A lazily built, process-cached boto3 client for `purpose` (a row of
    `sdk_clients.SDK_CLIENTS`, e.g. "verb_invoke", "replay", "heartbeat_bus": the service, its
    retries and timeouts), so code outside this package never imports the SDK itself.
    `read_timeout`: the caller's own deadline when it has one (a verb invoke: that verb's)."""
    from fleetmem.adapters.aws.dynamo import AwsClients

    clients = _shared_clients.get(region)
    if clients is None:
        clients = _shared_clients.setdefault(region, AwsClients(region=region))
    return clients.client(purpose, read_timeout=read_timeout)


def __getattr__(name: str) -> Any:
    # BedrockEmbedder/BedrockLLM are importable from the package without importing boto3 here.
    if name in {"BedrockEmbedder", "BedrockLLM"}:
        from fleetmem.adapters.aws import bedrock

        return getattr(bedrock, name)
    raise AttributeError(name)


__all__ = ["AwsStores", "BedrockEmbedder", "BedrockLLM", "NoSearchIndex", "open_aws", "sdk_client"]
