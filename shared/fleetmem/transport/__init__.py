"""Transports: everything between a caller and `dispatch()`.

- `dispatch`: THE one dispatch (surface/scope gate, D3, validation, D2 idempotency, error envelopes).
- `invoker`: in-process or per-verb Lambda invocation of `dispatch`.
- `mcp_app`: the MCP streamable-HTTP app (both protocol eras) and its HTTP edge (405/406/401, health,
  protected-resource metadata).
- `http_local`: `fleetmem serve` under uvicorn.
- `logs`: JSON logs with the call's correlation id on every line.
"""
