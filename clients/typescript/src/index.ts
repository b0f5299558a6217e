/**
 * A typed client for fleetmem's plain HTTP API (`/v1`).
 *
 * Every type comes from `schema.d.ts`, which openapi-typescript generates from the server's own
 * OpenAPI document (`GET /v1/openapi.json`); the requests go through openapi-fetch. A refused call
 * throws `FleetmemError`, carrying the AGENT_OPERATOR error envelope the server answered with.
 */
import createClient, { type Client } from "openapi-fetch";

import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

type Schemas = components["schemas"];

/** Every non-2xx body of `/v1`: what failed, what to do, and the runnable next step. */
export type ErrorEnvelope = Schemas["ErrorEnvelope"];
/** The envelope's `fix`: the next step (`next`), who takes it (`actor`) and why. */
export type RenderedFix = ErrorEnvelope["fix"];
/** What `dry_run: true` answers on a tool without its own `dry_run` parameter. */
export type DryRunResult = Schemas["DryRunResult"];
/** `GET /v1/tools`'s answer. */
export type ToolList = Schemas["ToolList"];

/** The tools of `/v1`: every operation the document has a JSON request body for (`POST /v1/<tool>`). */
export type ToolName = {
  [N in keyof operations]: operations[N] extends { requestBody: { content: { "application/json": unknown } } }
    ? N
    : never;
}[keyof operations];

/** A tool's arguments, as its request body schema declares them. */
export type ToolParams<N extends ToolName> = operations[N]["requestBody"]["content"]["application/json"];

/** A tool's result (its 200 body, the same object as MCP's `structuredContent`). */
export type ToolResult<N extends ToolName> = Exclude<
  operations[N]["responses"][200]["content"]["application/json"],
  DryRunResult
>;

export interface FleetmemClientOptions {
  /** The server's address without `/v1`, e.g. `http://127.0.0.1:8765`. */
  baseUrl: string;
  /** A fleetmem API token (`fleetmem token create`) or, on AWS, a Cognito access token. */
  token: string;
  /** Another fetch (tests, proxies); defaults to the global one. */
  fetch?: (input: Request) => Promise<Response>;
}

export interface CallOptions {
  /** Cancels the request. */
  signal?: AbortSignal;
}

const CORRELATION_HEADER = "X-Correlation-Id";

/** A call `/v1` refused. `envelope` is the body when it is fleetmem's error envelope (every answer
 * of a fleetmem server is); the fields below are read from it. */
export class FleetmemError extends Error {
  override readonly name = "FleetmemError";
  /** The envelope code, e.g. `scope_denied`, `invalid_params`, `not_found`. */
  readonly code: string;
  /** The next step, rendered for this caller; absent only when the body was not an envelope. */
  readonly fix: RenderedFix | undefined;
  /** What to do, in words. */
  readonly suggestion: string | undefined;
  /** The call's correlation id (quote it to the operator). */
  readonly correlation_id: string | undefined;
  /** Whether the same call may succeed later. */
  readonly retryable: boolean;
  /** The HTTP status. */
  readonly status: number;
  /** The whole envelope, when the body was one. */
  readonly envelope: ErrorEnvelope | undefined;

  constructor(status: number, body: unknown, correlationId: string | null) {
    const envelope = isEnvelope(body) ? body : undefined;
    const fields = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
    super(
      envelope?.message ??
        (typeof fields.message === "string" ? fields.message : `fleetmem answered HTTP ${status}`),
    );
    this.status = status;
    this.envelope = envelope;
    // A body from a proxy in front of the server may carry only `error`.
    this.code = envelope?.code ?? String(fields.code ?? fields.error ?? `http_${status}`);
    this.fix = envelope?.fix;
    this.suggestion = envelope?.suggestion;
    this.correlation_id = envelope?.correlation_id ?? correlationId ?? undefined;
    this.retryable = envelope?.retryable ?? false;
  }
}

function isEnvelope(body: unknown): body is ErrorEnvelope {
  if (typeof body !== "object" || body === null) return false;
  const b = body as Record<string, unknown>;
  return (
    typeof b.code === "string" &&
    typeof b.message === "string" &&
    typeof b.correlation_id === "string" &&
    typeof b.fix === "object" &&
    b.fix !== null
  );
}

export class FleetmemClient {
  /** The underlying openapi-fetch client (typed by the same document), for `GET /v1/tools` and the like. */
  readonly http: Client<paths>;

  constructor(options: FleetmemClientOptions) {
    if (!options.token) throw new TypeError("createFleetmemClient: token is required");
    // The token lives only in this header; it is never logged or put on an error.
    this.http = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers: { Authorization: `Bearer ${options.token}` },
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }

  /** Calls `POST /v1/<tool>` with typed arguments; resolves to the typed result or throws `FleetmemError`. */
  async call<N extends ToolName>(tool: N, params: ToolParams<N>, options: CallOptions = {}): Promise<ToolResult<N>> {
    // openapi-fetch types one literal path per call; a tool name generic over every path is checked
    // by this method's own signature instead.
    const post = this.http.POST as unknown as (
      url: string,
      init: { body: unknown; signal?: AbortSignal },
    ) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
    const { data, error, response } = await post(`/v1/${tool}`, { body: params, signal: options.signal });
    if (!response.ok) throw new FleetmemError(response.status, error, response.headers.get(CORRELATION_HEADER));
    return data as ToolResult<N>;
  }

  /** `GET /v1/tools`: the tools this credential may call on this server's surface. */
  async tools(options: CallOptions = {}): Promise<ToolList> {
    const { data, error, response } = await this.http.GET("/v1/tools", { signal: options.signal });
    if (!response.ok || data === undefined) {
      throw new FleetmemError(response.status, error, response.headers.get(CORRELATION_HEADER));
    }
    return data;
  }
}

/** A client for the fleetmem server at `baseUrl`, calling with `token`'s tenant and scopes. */
export function createFleetmemClient(options: FleetmemClientOptions): FleetmemClient {
  return new FleetmemClient(options);
}
