"""How long each part of a deployed call may take: the one table the CDK app reads for the
function timeouts and the edge's invoker reads (through `FLEETMEM_INVOKE_DEADLINES_S`, which the
CDK app derives from the same numbers) for how long it waits on each verb.

A verb's timeout is the sum of what it does, each step bounded on its own:

- Bedrock embedding (`EMBED_TIMEOUT_S` per attempt, `EMBED_RETRIES` retry, 2 s connect): at most
  2 x (2 + 3) = 10 s, about 6 s when the model is slow rather than unreachable; a query embedding
  that fails makes the search keyword-only, a write's makes dedup exact-text only (D7).
- the OpenSearch query (`SEARCH_TIMEOUT_S`, no retry): a search that hangs fails in 3 s with
  `unavailable` + Retry-After, and after `BREAKER_FAILURES` such failures in a row a sandbox stops
  asking for `BREAKER_OPEN_S` (each recall answers at once), then lets one call try again.
- DynamoDB (2 s connect, 10 s read per attempt, the SDK's standard retries): milliseconds when
  healthy; the rest of each budget.

No deployed write waits on search: remember and put_page write DynamoDB and the stream indexer
indexes after the fact (D11 `search_state: pending`). Only recall and synthesize query the index.
No third-party imports: the CDK app reads this module.
"""

from __future__ import annotations

from typing import Final

#: Seconds one Bedrock embedding attempt may take to answer (after the 2 s connect).
EMBED_TIMEOUT_S: Final = 3
#: Retries after the first embedding attempt (throttling and timeouts; botocore standard mode).
EMBED_RETRIES: Final = 1
#: Seconds one OpenSearch query may take on the request path (one attempt, no retry).
SEARCH_TIMEOUT_S: Final = 3
#: Consecutive search timeouts / unreachable answers after which a sandbox fails fast ...
BREAKER_FAILURES: Final = 3
#: ... for this many seconds (the Retry-After it answers), before one call tries the index again.
BREAKER_OPEN_S: Final = 10

#: Function timeout (seconds) per function group: what each verb does, bounded step by step.
FUNCTION_TIMEOUT_S: Final[dict[str, int]] = {
    "recall": 15,  # embed <= 10, search <= 3, DynamoDB reads
    "remember": 15,  # embed <= 10 (dedup), DynamoDB transaction; no search
    "entity": 10,  # DynamoDB only
    "forget": 10,  # DynamoDB only
    "delta": 10,  # DynamoDB only; answers by its own 2 s server deadline (D10)
    "context_pack": 20,  # several DynamoDB arms; answers by its server deadline (D10)
    "synthesize": 25,  # retrieval (as recall) + the LLM call (18 s deadline) + its fallback
    "pages": 15,  # page reads/writes on DynamoDB; put_page embeds nothing on the request path
    "admin": 15,  # trace / purge on DynamoDB
    "mcp": 28,  # the edge: above the slowest verb's invoke deadline, below API Gateway's 29 s
}
#: The edge waits this much longer than a verb function's own timeout, so it reads the function's
#: answer (or the platform's timeout error) rather than giving up first.
INVOKE_MARGIN_S: Final = 1
#: The groups whose calls wait on the search index (their reserved concurrency is capped so that
#: a slow index cannot hold most of the edge's slots: infra/config.py, `capacity`).
SEARCH_GROUPS: Final = frozenset({"recall", "synthesize"})


def invoke_deadline(function_timeout_s: int) -> int:
    """How long the edge waits for a verb function with this timeout."""
    return function_timeout_s + INVOKE_MARGIN_S
