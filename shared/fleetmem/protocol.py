"""Protocol constants: names, versions, enums and codes of MEMORY_VERBS v1 + AGENT_OPERATOR v1.

No third-party imports: this module is read by the domain, the transports, the CDK app and the
conformance runner alike, so it must import instantly everywhere.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

PROTOCOL_VERSION: Final = 1
CONTRACT_VERSION: Final = 1
SERVER_NAME: Final = "fleetmem"

#: The seven frozen memory verbs, in the order the spec lists them.
VERB_NAMES: Final = ("recall", "remember", "entity", "synthesize", "forget", "context_pack", "delta")
#: Page tools served on the `full` surface.
PAGE_TOOLS: Final = ("put_page", "get_page", "list_pages", "delete_page")
#: Admin-scope tools served on the `full` surface.
ADMIN_TOOLS: Final = ("trace_fact", "purge_fact", "export_pack", "import_pack")
#: Read-scope tools that inspect the memory (full surface), served by the admin function on AWS.
INSPECT_TOOLS: Final = ("list_facts", "list_activity", "memory_stats")
#: The caller's own credential, tokens and followers, on the `full` surface (served with the admin tools).
ACCOUNT_TOOLS: Final = ("whoami", "list_followers", "list_tokens", "create_token", "revoke_token")
#: D22: the caller's own write receipts, on the `full` surface (served with the admin tools on AWS).
RECEIPT_TOOLS: Final = ("get_write_request", "list_write_requests", "cancel_write_request")

Surface = Literal["verbs", "full"]
SURFACES: Final = ("verbs", "full")
Scope = Literal["read", "write", "admin"]
SCOPES: Final = ("read", "write", "admin")

FactKind = Literal["event", "preference", "commitment", "belief", "fact"]
FACT_KINDS: Final = ("event", "preference", "commitment", "belief", "fact")
Visibility = Literal["world", "private"]
#: remember's `content_origin` (reference 0.60): who produced the fact's text (D24)
ContentOrigin = Literal["user_said", "tool_output", "inferred"]
CONTENT_ORIGINS: Final = ("user_said", "tool_output", "inferred")
#: the trust tier a content origin reads back as: only tool output is untrusted
TrustTier = Literal["agent_written", "external_untrusted"]
VISIBILITIES: Final = ("world", "private")

Evidence = Literal["alias_hit", "exact_title_match", "high_vector_match", "keyword_exact", "weak_semantic"]
EVIDENCE_ORDER: Final = ("alias_hit", "exact_title_match", "high_vector_match", "keyword_exact", "weak_semantic")
CreateSafety = Literal["exists", "probable", "unknown"]
CREATE_SAFETY_FOR: Final = {
    "alias_hit": "exists",
    "exact_title_match": "exists",
    "high_vector_match": "exists",
    "keyword_exact": "probable",
    "weak_semantic": "unknown",
}
RememberStatus = Literal["inserted", "duplicate", "superseded"]
SearchState = Literal["current", "pending"]

#: Error codes a verb may return (MEMORY_VERBS v1) — `budget_unsatisfiable` is reserved, never returned.
VerbErrorCode = Literal[
    "invalid_params",
    "provenance_required",
    "not_found",
    "scope_denied",
    "unavailable",
    "budget_unsatisfiable",
    "internal",
]
#: Codes outside the verb set that share the same envelope.
OtherErrorCode = Literal["unknown_tool", "unauthorized", "rate_limited"]
#: Every code an error envelope carries (`VerbError.code`, the envelope's `error` and `code`).
ErrorCode = Literal[VerbErrorCode, OtherErrorCode]
VERB_ERROR_CODES: Final[tuple[ErrorCode, ...]] = get_args(VerbErrorCode)
OTHER_ERROR_CODES: Final[tuple[ErrorCode, ...]] = get_args(OtherErrorCode)
ERROR_CODES: Final[tuple[ErrorCode, ...]] = VERB_ERROR_CODES + OTHER_ERROR_CODES

#: Where a call came from, as the envelope renders its fix: an MCP connection (`mcp`), an HTTP answer
#: below the tools (`http`: a refusal, a 401, a gateway body), `POST /v1/<tool>` (`v1`) or the CLI.
Transport = Literal["mcp", "http", "v1", "cli"]
TRANSPORTS: Final[tuple[Transport, ...]] = ("mcp", "http", "v1", "cli")

ErrorClass = Literal["caller", "consent", "retryable", "unavailable", "server", "host_only"]
NextStep = Literal["run", "ask_user", "tell_user_to_run", "wait", "report"]
Actor = Literal["agent", "user", "host_admin", "provider"]
NoticeKind = Literal["safety", "degraded", "coaching", "ask", "info"]
NOTICE_KIND_ORDER: Final = ("safety", "degraded", "ask", "coaching", "info")

#: Numbers the protocol fixes.
DEFAULT_RECALL_LIMIT: Final = 50
MAX_RECALL_LIMIT: Final = 100
CONTEXT_PACK_MAX_ENTITIES: Final = 8
DELTA_PAGE_LIMIT: Final = 50
DELTA_FACT_LIMIT: Final = 50
DELTA_MAX_THREAD_ENTITIES: Final = 8
SESSION_ID_MAX: Final = 200
SESSION_IDLE_DAYS: Final = 7
SESSIONS_PER_CLIENT: Final = 1000
PROVENANCE_MAX: Final = 500
#: Size limits (D16): over -> invalid_params whose fix says what to do instead.
FACT_MAX: Final = 2000  # characters of one fact (longer text belongs on a page: put_page)
SLUG_MAX: Final = 200  # characters of a slug ...
SLUG_SEGMENT_MAX: Final = 100  # ... and of each "/"-separated segment
TITLE_MAX: Final = 300  # characters of a page title (also the longest name an entity input can match)
ALIAS_MAX: Final = 200  # characters of one alias
ALIASES_MAX: Final = 50  # aliases per page
DEDUP_NEIGHBOURS: Final = 5
DEDUP_THRESHOLD: Final = 0.95
HIGH_VECTOR_MATCH: Final = 0.80
PAGE_BODY_MAX_BYTES: Final = 350 * 1024
#: bytes of put_page's whole `content`: above it nothing is parsed (no page that large can be stored)
PAGE_CONTENT_MAX_BYTES: Final = 1024 * 1024
#: characters of recall's `query` (more than any question; a longer one is refused before any work)
RECALL_QUERY_MAX: Final = 4000
IDEMPOTENCY_TTL_HOURS: Final = 24
#: D2: how long an in-flight claim holds its key (the default of FLEETMEM_IDEMPOTENCY_LEASE_S).
#: Longer than a write runs (a verb function's timeout is below the edge's 26 s invoke read timeout;
#: a local write waits at most 30 s for another process's lock), so in practice only a call killed
#: before its result loses its key to a retry; one that outlives it anyway only means the retry runs
#: the verb again, whose own dedup keeps the memory single.
IDEMPOTENCY_LEASE_SECONDS: Final = 60
HOT_FACTS_HOURS: Final = 24
HOT_FACTS_LIMIT: Final = 10
#: D32: the core block's default character limit (FLEETMEM_CORE_CHARS; 0 turns core memory off)
CORE_CHARS_DEFAULT: Final = 4000
OPEN_THREADS_MAX: Final = 3
OPEN_THREAD_TIMELINE_DAYS: Final = 90
EDGES_MAX: Final = 10
SUMMARY_MAX_CHARS: Final = 160
SUGGESTIONS_MAX: Final = 3

#: Link type of a `[[slug]]` mention in a page body: listed as a link, never counted as a backlink
#: nor shown as a card edge (docs/protocol.md, entity).
MENTION_LINK_TYPE: Final = "mentions"

#: Reserved cursor namespaces (docs/protocol.md, delta).
LOCAL_CLIENT: Final = "local"
REMOTE_CLIENT: Final = "remote"


# ---- D22: request ids and durable write receipts -------------------------------------------------
#: A write's `request_id`: 1–128 printable ASCII characters (0x21–0x7E).
REQUEST_ID: Final = "request_id"
REQUEST_ID_MAX: Final = 128
#: A request id that is not a UUID is mapped to the UUIDv5 of itself under this namespace.
REQUEST_ID_NAMESPACE: Final = "3f6a2c1e-9b47-4d2a-8e5f-7c0b1d9a6e24"
#: A write receipt's `state` (the reference's enum; fleetmem's writes are synchronous, so it stores
#: running, committed and cancelled and reads recovering off a claim whose holder died).
WriteState = Literal["queued", "running", "recovering", "committed", "conflict", "failed", "cancelled"]
TERMINAL_WRITE_STATES: Final = ("committed", "conflict", "failed", "cancelled")
#: A pending receipt's `diagnostic` (the reference's WRITE_HEALTH_* allowlists; fleetmem sends
#: pending, recovery_required and owner_unavailable as reasons).
WriteHealthReason = Literal[
    "pending",
    "waiting_on_earlier_write",
    "database_contention",
    "writer_busy",
    "revision_changed_repreparing",
    "recovery_required",
    "writer_pool_capacity",
    "owner_unavailable",
    "writer_lock_unavailable",
    "consumer_stopping",
    "cause_unknown",
]
WRITE_HEALTH_REASONS: Final[tuple[WriteHealthReason, ...]] = get_args(WriteHealthReason)
WriteHealthAssessment = Literal["pending", "blocked", "stalled"]
WriteHealthAction = Literal["poll", "inspect_owner"]
#: `write_error` values fleetmem sends on error envelopes (spelled as the reference spells them).
WriteError = Literal["idempotency_conflict", "write_pending"]
#: How many receipts one `list_write_requests` page holds at most (and by default).
WRITE_REQUESTS_PAGE_MAX: Final = 100
WRITE_REQUESTS_PAGE_DEFAULT: Final = 20


def request_uuid(request_id: str) -> tuple[str, str | None]:
    """The request id a write is stored under, and the caller's own id when that is not it: a UUID
    is kept (lowercased), any other id maps to its UUIDv5 under `REQUEST_ID_NAMESPACE`."""
    import uuid

    try:
        return str(uuid.UUID(request_id)).lower(), (None if _is_canonical_uuid(request_id) else request_id)
    except ValueError:
        return str(uuid.uuid5(uuid.UUID(REQUEST_ID_NAMESPACE), request_id)), request_id


def _is_canonical_uuid(text: str) -> bool:
    """A UUID written in its canonical 8-4-4-4-12 form (any case): kept, not echoed back."""
    parts = text.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12]


def tool_request_hash(tool: str, params_hash: str) -> str:
    """What makes two writes under one request id "the same write": the tool and the hash of its
    validated parameters (so one id reused for another tool is a conflict, not a replay)."""
    import hashlib

    return hashlib.sha256(f"{tool}\x00{params_hash}".encode()).hexdigest()
