"""The call contract: what every transport and every adapter agrees on about one tool call, with
no transport in it. Transports (`fleetmem.transport`) and adapters (`fleetmem.adapters`) import it;
it imports neither.

- `tools`: a tool's complete input schema (with `idempotency_key`) and result schema, as MCP
  tools/list, `/v1`'s OpenAPI document and the CLI show them.
- `result`: `DispatchResult`, the answer of `dispatch()`, and its JSON form across a process edge.
- `invoker`: the `Invoker` port and the invoke payload a verb function receives.
- `routes`: the HTTP routes (`/mcp`, `/v1/<tool>`, the protected-resource metadata) and methods.
- `status`: error code -> HTTP status, and the headers of a `/v1` answer.
- `correlation`: the call's correlation id.
"""
