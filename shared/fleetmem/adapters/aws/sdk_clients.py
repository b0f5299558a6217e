"""Every SDK client the code builds, with its retries and timeouts set against its caller's deadline:
the ONE table `AwsClients.client(purpose)` builds from (docs/deploy.md, "Retries and deadlines").

A purpose that is not in `SDK_CLIENTS` is refused, so no client silently gets botocore's defaults
(legacy mode, 5 attempts, 60 s read timeout). `attempts` counts every attempt, the first included
(botocore's `total_max_attempts`): 1 means no retry. The rule: a caller that has its own deadline
and a designed answer for a failure (`unavailable` with Retry-After) gets one attempt, or as many
as fit in that deadline; a retry that could run a non-idempotent action twice (a Lambda invoke of a
verb) is never made by the SDK. Background callers (the stream indexer, the heartbeat, the rotation
function, the CLI) keep botocore's standard retries: their work is retry-safe and nobody waits on it.

OpenSearch is reached through opensearch-py (the SigV4 signer takes only credentials from boto3,
no client), so its two rows here are read by `opensearch.build_client`'s callers, not by
`AwsClients`. No third-party imports: the CDK app and the docs check read this module.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Final

from fleetmem.adapters.aws.deadlines import EMBED_RETRIES, EMBED_TIMEOUT_S, FUNCTION_TIMEOUT_S, SEARCH_TIMEOUT_S

#: Seconds the LLM call may take before synthesize answers with its extractive fallback (one
#: attempt: a retry could not finish inside the API's 29 s integration timeout).
LLM_DEADLINE_S: Final = 18.0
#: Seconds the edge waits for a verb function at most (the deploy sets each verb's own, shorter
#: deadline per stage: `FLEETMEM_INVOKE_DEADLINES_S`, read timeout of that verb's client).
INVOKE_READ_TIMEOUT_S: Final = 26


@dataclass(frozen=True)
class ClientPolicy:
    """How one purpose's client talks to its service."""

    service: str  #: the boto3 service name ("opensearch": opensearch-py, not boto3)
    caller: str  #: who calls it, and under which deadline (the docs table shows this)
    attempts: int  #: every attempt, the first included (1: no retry)
    read_timeout_s: float  #: per attempt; a caller may pass a shorter deadline of its own
    connect_timeout_s: float = 2
    mode: str = "standard"  #: botocore's retry mode (standard: backoff with jitter, throttle-aware)


SDK_CLIENTS: Final[dict[str, ClientPolicy]] = {
    "verb_invoke": ClientPolicy(
        "lambda",
        "the MCP edge invoking a verb function (RequestResponse); reads for that verb's deadline "
        f"(its function's timeout + 1 s, at most {INVOKE_READ_TIMEOUT_S} s). Never retried: a "
        "throttled or timed-out invoke answers `unavailable` with Retry-After at once, and a retry "
        "could run a write twice",
        attempts=1,
        read_timeout_s=INVOKE_READ_TIMEOUT_S,
    ),
    "stores": ClientPolicy(
        "dynamodb",
        "every function's stores (request path and background); milliseconds when healthy; "
        "retries answer throttling and 5xx, and every conditional write is safe to retry "
        f"(tests/aws/test_retries.py); a verb's function timeout ({min(FUNCTION_TIMEOUT_S.values())}-"
        f"{max(FUNCTION_TIMEOUT_S.values())} s) bounds a hung table",
        attempts=4,
        read_timeout_s=10,
    ),
    "embed": ClientPolicy(
        "bedrock-runtime",
        "Titan embeddings on recall/remember: at most 2 x (2 + 3) = 10 s of the verb's 15 s; a "
        "failed query embedding makes the search keyword-only",
        attempts=1 + EMBED_RETRIES,
        read_timeout_s=EMBED_TIMEOUT_S,
    ),
    "llm": ClientPolicy(
        "bedrock-runtime",
        f"synthesize's LLM call: one attempt of {LLM_DEADLINE_S:g} s in the function's "
        f"{FUNCTION_TIMEOUT_S['synthesize']} s, then the extractive fallback",
        attempts=1,
        read_timeout_s=LLM_DEADLINE_S,
    ),
    "signing_keys": ClientPolicy(
        "secretsmanager",
        "a cold sandbox reading the signing keys (edge, authorizer, verbs; 2 reads, then cached "
        "for the key TTL): at most 2 x 2 x (1 + 2) = 12 s; a failed refresh keeps the keys held",
        attempts=2,
        read_timeout_s=2,
        connect_timeout_s=1,
    ),
    "signing_rotation": ClientPolicy(
        "secretsmanager",
        "the rotation function (one step per invoke, 30 s timeout; Secrets Manager retries a failed step)",
        attempts=3,
        read_timeout_s=5,
    ),
    "replay": ClientPolicy(
        "sqs",
        "the stream indexer keeping a failed record for replay (120 s timeout), `fleetmem admin replay`",
        attempts=3,
        read_timeout_s=10,
    ),
    "heartbeat_queue": ClientPolicy(
        "sqs",
        "the heartbeat delivering to a queue (at-least-once; a failure leaves the cursor for the next wake)",
        attempts=3,
        read_timeout_s=10,
    ),
    "heartbeat_bus": ClientPolicy(
        "events",
        "the heartbeat delivering to a webhook through the stage's event bus (as heartbeat_queue)",
        attempts=3,
        read_timeout_s=10,
    ),
    "admin_tables": ClientPolicy(
        "dynamodb",
        "`fleetmem admin status` counting the tables (an operator waits; no deadline of its own)",
        attempts=4,
        read_timeout_s=10,
    ),
    "admin_functions": ClientPolicy(
        "lambda",
        "`fleetmem admin status` listing the stage's functions and aliases (reads only)",
        attempts=3,
        read_timeout_s=10,
    ),
    "tenant_queues": ClientPolicy(
        "sqs",
        "`fleetmem tenant delete --backend aws` sweeping the tenant's messages from the stage's queues "
        "(an operator waits; receives and deletes are safe to retry)",
        attempts=3,
        read_timeout_s=10,
    ),
    "preflight_apigateway": ClientPolicy(
        "apigateway",
        "`fleetmem admin preflight` reading the account's API Gateway settings (one read; an operator waits)",
        attempts=3,
        read_timeout_s=10,
    ),
    "preflight_iam": ClientPolicy(
        "iam",
        "`fleetmem admin preflight` checking that API Gateway's CloudWatch role exists (one read)",
        attempts=3,
        read_timeout_s=10,
    ),
    "preflight_bedrock": ClientPolicy(
        "bedrock",
        "`fleetmem admin preflight` checking model access for the stage's embedding model and LLM (reads only)",
        attempts=3,
        read_timeout_s=10,
    ),
    "stage_clients": ClientPolicy(
        "cognito-idp",
        "`fleetmem stage clients sync` listing the user pool's app clients and creating the missing ones "
        "(an operator waits; a retried create is found by name on the next run)",
        attempts=3,
        read_timeout_s=10,
    ),
    "search": ClientPolicy(
        "opensearch",
        "recall/synthesize querying the index: one attempt, then `unavailable` + Retry-After and the sandbox's breaker",
        attempts=1,
        read_timeout_s=SEARCH_TIMEOUT_S,
    ),
    "index": ClientPolicy(
        "opensearch",
        "the stream indexer's writes and `fleetmem admin reindex` (a retried bulk write is idempotent)",
        attempts=3,
        read_timeout_s=10,
    ),
    "search_roles": ClientPolicy(
        "opensearch",
        "the deploy's search role mapping (a custom resource, 60 s timeout): four idempotent PUTs to the "
        "security API, safe to retry",
        attempts=3,
        read_timeout_s=10,
    ),
    "search_admin_session": ClientPolicy(
        "sts",
        "the search role mapping assuming the search-admin role for its four PUTs (once per deploy)",
        attempts=3,
        read_timeout_s=5,
    ),
}


def policy(purpose: str) -> ClientPolicy:
    """The row for `purpose`; a purpose without one is a programming error, refused loudly."""
    try:
        return SDK_CLIENTS[purpose]
    except KeyError:
        raise KeyError(
            f"no SDK client policy for {purpose!r}: add its row to fleetmem.adapters.aws.sdk_clients.SDK_CLIENTS"
        ) from None


_loader: Any = None
_loader_lock = threading.Lock()


def new_session(**kwargs: Any) -> Any:
    """A boto3 `Session(**kwargs)` reading the SDK's service descriptions through one loader per
    process. Each session still resolves its own credentials, region and endpoints; only the parsed
    JSON models (endpoints, partitions, each service's API) are shared, read-only. A session with a
    loader of its own parses them again for its first client: ~200 ms of CPU against ~18 ms."""
    import boto3
    import botocore.session

    global _loader
    core = botocore.session.Session()
    with _loader_lock:
        if _loader is None:
            _loader = core.get_component("data_loader")
        else:
            core.register_component("data_loader", _loader)
        session = boto3.session.Session(botocore_session=core, **kwargs)
        # boto3 adds its own data directory to the loader's search path for every session
        _loader.search_paths[:] = list(dict.fromkeys(_loader.search_paths))
    return session
