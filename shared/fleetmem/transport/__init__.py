"""Transports: everything between a caller and `dispatch()`. What they agree on with each other and
with the adapters (schemas, `DispatchResult`, the `Invoker` port, routes, statuses) is
`fleetmem.contract`.

- `dispatch`: THE one dispatch (surface/scope gate, D3, validation, D2 idempotency, error envelopes).
- `invoker`: the in-process `Invoker`, and a verb function's answer to the edge's payload.
- `mcp_app`: the MCP streamable-HTTP app (both protocol eras) and its HTTP edge (405/406/401, health,
  protected-resource metadata).
- `http_local`: `fleetmem serve` under uvicorn.
- `logs`: JSON logs with the call's correlation id on every line.
"""
