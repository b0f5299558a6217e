"""Transports: everything between a caller and `dispatch()`. What they agree on with each other and
with the adapters (schemas, `DispatchResult`, the `Invoker` port, routes, statuses) is
`fleetmem.contract`.

- `dispatch`: THE one dispatch (surface/scope gate, D3, validation, D2 idempotency, error envelopes).
- `invoker`: the in-process `Invoker`, and the call a verb function received (`ReceivedCall`).
- `mcp_app`: the MCP SDK server (tools/list, tools/call) and the app that serves it, built from
  `guard` (the ASGI guard: 405/406/400/413/401, DNS rebinding), `refusals` (HTTP refusals as the
  envelope), `jsonrpc` (JSON-RPC refusals before the SDK), `callers` (who is calling, and where
  from) and `app_routes` (health, protected-resource metadata, `/v1`).
- `http_api`: `/v1` (`handle_v1_call`, `v1_response`); `openapi`: its OpenAPI document.
- `idempotency`: D2, a keyed call run at most once (`IdempotentCall`).
- `http_local`: `fleetmem serve` under uvicorn.
- `logs`: JSON logs with the call's correlation id on every line.
"""
