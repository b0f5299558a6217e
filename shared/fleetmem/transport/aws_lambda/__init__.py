"""Lambda event handling: everything the thin handlers in `functions/` call.

- `runtime` — the sandbox's Settings, Deps, Auth, edge invoker and payload signer, each built once
  and reused by warm invocations (`reset()` forgets them; tests change the environment).
- `proxy` — API Gateway REST proxy events: body, headers, responses, the ASGI bridge.
- `tools` — a tool function: the edge's signed invoke payload or `POST /v1/<tool>`.
- `edge` — the MCP edge: a REST proxy event through a fresh MCP app.
- `authorizer` — the REQUEST authorizer (the `Auth` port: API token or Cognito access token).
- `indexer` — DynamoDB stream records into the search index (partial batch failures).
- `heartbeat` — a scheduled delta delivered to SQS or an EventBridge bus.

Imports of the MCP SDK, Powertools and boto3 happen inside the functions that need them, so a verb
function never pays for the SDK the edge uses and nothing connects at import. (`lambda` is a
Python keyword, hence the package name.)
"""

#: Where a handler's log lines find the call's correlation id (Powertools `correlation_id_path`,
#: JMESPath): the edge's invoke payload, else API Gateway's request id.
CORRELATION_PATH = "correlation_id || requestContext.requestId"
