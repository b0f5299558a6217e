"""recall — saved facts plus (with `query`) budget-packed page snippets (docs/protocol.md: recall,
budgets; D4, D8, D9, D13).

Public API: `RecallParams`, `RecallResult`, `run(deps, caller, params, ctx) -> Outcome`,
`fact_model(fact, now=None) -> FactItem` (the legacy facts[] item, with its state when `now` is
given) and `fact_item(fact) -> dict` (its wire form; other verbs reuse them),
`fact_status(fact, now) -> dict` (`status` and, where they apply, `superseded_by`/`expired_at`).

Facts arm — at most one of entity > session_id applies, and `since` ANDs with it (D31: created_at >
since, cut in the store's index range before `limit` counts; without entity or session_id it alone
filters). The entity filter
resolves the name as remember files it (`entities.filter_slug`, which list_facts uses too); a
path ("../x") or a name with no letter or digit that no page has as title or alias is
`invalid_params` (`entities.require_slug`). With no
filter and a query, facts are ranked by hybrid relevance to the query (D13: RRF of the keyword and
vector arms over fact docs; the vector arm ranks every fact, so this orders rather than filters);
with no filter and no query, the most recent facts come first. Only active facts (not forgotten, not
superseded, not past `valid_until`) unless `include_expired`; then every fact item also carries
`status` (active | forgotten | superseded | expired) and, where they apply, `superseded_by` (the
replacing fact's id) and `expired_at` (when it stopped being live: the forget or supersession
instant, or the passed `valid_until`). Remote callers see world facts only; `include_private`
widens only for trusted-local callers.

`limit` outside 1..100 is clamped and the response carries a `clamped` notice saying so. A `query`
longer than RECALL_QUERY_MAX (4,000) characters is `invalid_params` before any work (D16).

Redaction (D25): a remote caller's facts have credential-shaped spans of `fact` and `provenance`
replaced by `<REDACTED:pattern>`, and so have results' `title` and `chunk`; the local lane reads
them as written. Both before the budget packs them; the search itself matches on the stored text.

Search arm — only with a non-empty query: hybrid keyword+vector over page chunks, fused (RRF),
best chunk per page, each result with evidence/create_safety (see `fleetmem.memory.search`).

Packing (D31): facts first, then results (`memory.budget`). `budget_policy: "query_first"` with a
non-blank query and a budget packs results first, then facts into what is left; any valid
`budget_policy` adds `budget_packing` (`packing_report`), which says which order ran and why.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema

from fleetmem.errors import Notice, Outcome
from fleetmem.memory import search as search_arm
from fleetmem.memory.budget import Packer, cost, costs, pack
from fleetmem.memory.common import (
    check_budget,
    clamp_limit,
    degraded_recall_notice,
    empty_retrieval_notice,
    loose_int,
    parse_since,
    too_long,
    world_only,
)
from fleetmem.memory.entities import filter_slug
from fleetmem.memory.indexing import chunk_display
from fleetmem.memory.params import DROP, Budget, Hint, Limit, Params, Since
from fleetmem.memory.redaction import redact, shown_facts
from fleetmem.memory.registry import read_tool
from fleetmem.models import BudgetFields, Caller, Fact, FactItem, RecallFact, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.ports.facts import FactReadOptions
from fleetmem.protocol import (
    CREATE_SAFETY_FOR,
    DEFAULT_RECALL_LIMIT,
    MAX_RECALL_LIMIT,
    PROTOCOL_VERSION,
    RECALL_QUERY_MAX,
    SESSION_ID_MAX,
    CreateSafety,
    Evidence,
)
from fleetmem.timefmt import iso

TOOL = "recall"

POLICIES = ("facts_first", "query_first")
PackingReason = Literal[
    "no_query", "no_positive_finite_budget", "budget_below_one", "no_candidates", "first_items_exceed_budget", "packed"
]


def _policy_fix(raw: Any, now: datetime) -> Any:
    """The policy a rejected value plainly spells ("Query-First" -> query_first), else none (the
    same call without it packs facts first)."""
    if isinstance(raw, str):
        spelled = raw.strip().lower().replace("-", "_").replace(" ", "_")
        if spelled in POLICIES:
            return spelled
    return DROP


#: D31: the reference's enum; null and "" count as absent (facts_first).
BudgetPolicy = Annotated[
    Literal["facts_first", "query_first"] | None,
    BeforeValidator(lambda v: None if v == "" else v),
    WithJsonSchema({"type": "string", "enum": list(POLICIES)}),
    Hint(
        accepts="facts_first or query_first",
        cause="budget_policy is facts_first (the default: facts pack first, then search results) or "
        "query_first (with a query and a budget: search results pack first, then facts).",
        fix=_policy_fix,
    ),
]


class RecallParams(Params):
    query: str | None = Field(
        None,
        description="What to look for, in words (at most 4,000 characters). Runs the hybrid page search "
        'and, without another filter, ranks saved facts by relevance. Example: "pricing decision for Acme".',
        json_schema_extra={"maxLength": RECALL_QUERY_MAX},
    )
    entity: str | None = Field(
        None, description='Only facts about this entity (slug or name), e.g. "people/alice-example".'
    )
    session_id: str | None = Field(None, description="Only facts saved with this session_id.")
    since: Since = Field(
        None,
        description='Only facts saved after this ISO 8601 date/datetime, e.g. "2026-06-01T00:00:00Z"; '
        "combines with entity or session_id.",
    )
    limit: Limit(DEFAULT_RECALL_LIMIT, MAX_RECALL_LIMIT, clamp=True) = Field(  # type: ignore[valid-type]
        None,
        description="Per-arm maximum (facts and search results each). Default 50, clamped to 1..100.",
    )
    budget_tokens: Budget = Field(
        None,
        description="Server-side token budget (chars/4): facts pack first, then search results; the "
        "response reports budget_used and dropped_count. Integer >= 1; omit for no budget.",
    )
    include_expired: bool = Field(False, description="Also return forgotten, superseded and TTL-expired facts.")
    include_private: bool = Field(
        False, description="Include private facts/pages. Honoured only for the owner's local CLI."
    )
    budget_policy: BudgetPolicy = Field(
        None,
        description="Which arm packs first under budget_tokens: facts_first (default) or query_first (search "
        "results first, then facts; only with a query and a budget). Given, the response adds budget_packing.",
    )

    #: budget, then limit, then since (§ recall), whatever their place in the model.
    check_order = ("budget_tokens", "limit", "since")


class RecallHit(Wire):
    slug: str
    title: str
    chunk: str
    evidence: Evidence
    create_safety: CreateSafety
    provenance: str


class RecallBody(Wire):
    protocol_version: int
    facts: list[RecallFact]
    total: int
    results: list[RecallHit]
    search_degraded: str | None = None


class PackingArm(Wire):
    candidates: int
    kept: int
    dropped: int
    used: int


class BudgetPacking(Wire):
    """D31: which packing order ran and why (`packing_report`)."""

    policy: Literal["facts_first", "query_first"]
    applied: bool
    reason: PackingReason
    facts: PackingArm
    results: PackingArm


class RecallResult(BudgetFields, RecallBody):
    """recall's body: RecallBody's fields, then the budget fields (pydantic lists the fields of the
    last base first), then `budget_packing` when the call named a `budget_policy`."""

    budget_packing: BudgetPacking | None = None


def fact_model(f: Fact, now: datetime | None = None) -> FactItem:
    """The facts[] item; with `now`, also the fact's state at `now` (`fact_status`)."""
    state = fact_status(f, now) if now is not None else {}
    return FactItem(
        id=f.seq,
        fact_id=f.fact_id,
        fact=f.text,
        kind=f.kind,
        entity_slug=f.entity_slug,
        provenance=f.provenance,
        visibility=f.visibility,
        created_at=iso(f.created_at),
        valid_until=iso(f.valid_until),
        session_id=f.session_id,
        **state,
    )


def fact_item(f: Fact) -> dict[str, Any]:
    """The facts[] item as it goes on the wire (context_pack and delta list it too)."""
    return fact_model(f).wire()


def recall_fact(f: Fact, now: datetime | None) -> RecallFact:
    """recall's facts[] item: the fact's item and state, with its trust stamp (D24)."""
    return RecallFact.model_validate({**fact_model(f, now).wire(), **trust_stamp(f)})


def trust_stamp(f: Fact) -> dict[str, Any]:
    """D24: `trust_tier` (`tool_output` -> `external_untrusted`, the other origins ->
    `agent_written`) and `origin` of a fact saved with a `content_origin`; {} otherwise."""
    if f.content_origin is None:
        return {}
    tier = "external_untrusted" if f.content_origin == "tool_output" else "agent_written"
    return {"trust_tier": tier, "origin": f.content_origin}


def fact_status(f: Fact, now: datetime) -> dict[str, Any]:
    """`status` of a fact at `now`, with `superseded_by` / `expired_at` where they apply."""
    status = f.status(now)
    if status == "superseded":
        return {"status": status, "superseded_by": f.superseded_by, "expired_at": iso(f.expired_at)}
    if status == "expired":
        return {"status": status, "expired_at": iso(f.valid_until)}
    if status == "forgotten":
        return {"status": status, "expired_at": iso(f.expired_at)}
    return {"status": status}


def _out_of_range(raw: Any) -> bool:
    """Whether `clamp_limit` moved a given limit (a fraction it merely rounds is not clamping)."""
    n = loose_int(raw)
    if n is None and isinstance(raw, float) and math.isfinite(raw):
        n = round(raw)
    return n is not None and not 1 <= n <= MAX_RECALL_LIMIT


def _clamped_notice(raw: Any, limit: int) -> Notice:
    return Notice(
        code="clamped",
        kind="info",
        why=f"limit {raw!r} is outside 1..{MAX_RECALL_LIMIT}; recall used limit {limit} for each arm.",
    )


def _fact_cost(item: FactItem) -> int:
    return cost(item.fact)


def _result_cost(item: RecallHit) -> int:
    return costs(item.title, item.chunk)


def _ranked_facts(
    deps: Deps,
    caller: Caller,
    query: str,
    *,
    limit: int,
    world: bool,
    include_expired: bool,
    embedded: search_arm.Embedded,
) -> tuple[list[Fact], str | None]:
    found = search_arm.hybrid_search(
        deps, caller.tenant, query, kinds=("fact",), world_only=world, k=min(200, limit * 2 + 10), embedded=embedded
    )
    ids = [f.hit.fact_id for f in found.hits if f.hit.fact_id]
    now = deps.clock.now()
    out: list[Fact] = []
    # Read in rank order, `limit` ids at a time, until `limit` facts are kept: a fact ranked below
    # the first `limit` kept ones cannot be in the answer, so it is not read (the search ranks up
    # to limit * 2 + 10 docs per arm; most recalls keep the first `limit` they read).
    start = 0
    while start < len(ids) and len(out) < limit:
        batch = ids[start : start + limit]
        start += len(batch)
        for fact in deps.facts.many(caller.tenant, batch):
            if world and fact.visibility != "world":
                continue
            if not include_expired and not fact.is_active(now):
                continue
            out.append(fact)
            if len(out) >= limit:
                break
    return out, found.degraded


def _facts_arm(
    deps: Deps,
    caller: Caller,
    params: RecallParams,
    *,
    query: str,
    since: datetime | None,
    limit: int,
    world: bool,
    embedded: search_arm.Embedded | None,
) -> tuple[list[Fact], str | None]:
    now = deps.clock.now()
    # the one read of each lookup below: event time after `since`, visibility, the per-arm limit
    read: FactReadOptions = {
        "now": now,
        "after": since,
        "active_only": not params.include_expired,
        "world_only": world,
        "limit": limit,
        "with_origin": True,
    }
    if params.entity and params.entity.strip():
        slug = filter_slug(deps, TOOL, caller.tenant, params.entity, world_only=world)
        facts = deps.fact_listing.by_entity(caller.tenant, slug, **read) if slug else []
    elif params.session_id:
        facts = deps.fact_listing.by_session(caller.tenant, params.session_id[:SESSION_ID_MAX], **read)
    elif since is None and query and embedded is not None:
        return _ranked_facts(
            deps,
            caller,
            query,
            limit=limit,
            world=world,
            include_expired=params.include_expired,
            embedded=embedded,
        )
    else:  # the newest facts, after `since` when given
        facts = deps.fact_listing.recent(caller.tenant, **read)
    # The store filters too; this keeps read-time expiry (D8) and privacy exact whatever it does.
    facts = [
        f for f in facts if (not world or f.visibility == "world") and (params.include_expired or f.is_active(now))
    ]
    return facts[:limit], None


def _search_arm(
    deps: Deps, caller: Caller, query: str, *, limit: int, world: bool, embedded: search_arm.Embedded
) -> tuple[list[RecallHit], str | None]:
    shown = redact if caller.remote else (lambda text: text)
    found = search_arm.hybrid_search(
        deps, caller.tenant, query, kinds=("chunk",), world_only=world, k=min(200, limit * 3), embedded=embedded
    )
    pages = search_arm.best_per_page(found.hits)[:limit]
    if not pages:
        return [], found.degraded
    aliases = search_arm.alias_slugs(deps, caller.tenant, query, world_only=world)
    results = []
    for f in pages:
        chunk = chunk_display(f.hit.text)
        evidence = search_arm.evidence_for(query, f, alias_hit_slugs=aliases, query_tokens=found.query_tokens)
        results.append(
            RecallHit(
                slug=f.hit.slug,
                title=shown(f.hit.title),
                chunk=shown(chunk),
                evidence=evidence,  # type: ignore[arg-type]
                create_safety=CREATE_SAFETY_FOR[evidence],  # type: ignore[arg-type]
                provenance=f.hit.slug,
            )
        )
    return results, found.degraded


def _check_query(query: str) -> None:
    """D16: a query longer than RECALL_QUERY_MAX characters is refused before it is embedded or searched."""
    if len(query) > RECALL_QUERY_MAX:
        raise too_long(
            f"query is longer than {RECALL_QUERY_MAX:,} characters ({len(query):,}).",
            problem=f"The query is {len(query):,} characters long; recall takes at most {RECALL_QUERY_MAX:,}.",
            cause="recall looks for a question's words, and every word of a query is searched and ranked: "
            "a query the size of a document only makes the search slow.",
            instead=f"ask with the words that name what you look for (at most {RECALL_QUERY_MAX:,} characters); "
            "to find the page a long passage came from, search for one distinctive sentence of it.",
            detail={"field": "query", "reason": "too_long", "limits": {"query": RECALL_QUERY_MAX}},
        )


def packing_report(policy: str, query: str, packer: Packer) -> BudgetPacking:
    """D31, the reference's `budget_packing`: the order that ran (`query_first` only with a query and
    a budget; otherwise `facts_first`, not applied), and the first reason that holds of: no_query
    (query_first without a query), no_positive_finite_budget (no budget_tokens), budget_below_one
    (never: D4 refuses a budget below 1), no_candidates, first_items_exceed_budget (nothing kept),
    packed. Each arm's tally comes from the packer, so `used` and `dropped` sum to the budget fields."""
    budget = packer.budget
    facts, results = packer.arms["facts"], packer.arms["results"]
    reason: PackingReason
    if policy == "query_first" and not query:
        reason = "no_query"
    elif budget is None:
        reason = "no_positive_finite_budget"
    elif budget < 1:
        reason = "budget_below_one"
    elif facts.candidates + results.candidates == 0:
        reason = "no_candidates"
    elif facts.kept + results.kept == 0:
        reason = "first_items_exceed_budget"
    else:
        reason = "packed"
    query_first = policy == "query_first" and bool(query) and budget is not None
    return BudgetPacking(
        policy="query_first" if query_first else "facts_first",
        applied=budget is not None and (query_first or policy == "facts_first"),
        reason=reason,
        facts=PackingArm(**facts.wire()),
        results=PackingArm(**results.wire()),
    )


def run(deps: Deps, caller: Caller, params: RecallParams, ctx: CallContext) -> Outcome:
    budget = check_budget(TOOL, params)
    limit = clamp_limit(TOOL, params, default=DEFAULT_RECALL_LIMIT, hi=MAX_RECALL_LIMIT)
    # Validated up front so a bad `since` fails even when a stronger filter wins.
    since = parse_since(TOOL, params, "since", deps.clock.now())
    world = world_only(caller, params.include_private)
    query = (params.query or "").strip()
    _check_query(query)
    # One embedding call serves both arms.
    embedded = search_arm.query_vector(deps, query, tenant=caller.tenant) if query else None

    # The two arms are independent: one concurrent round on network backends.
    (facts, facts_degraded), (results, degraded) = deps.gather(
        lambda: _facts_arm(deps, caller, params, query=query, since=since, limit=limit, world=world, embedded=embedded),
        lambda: (
            _search_arm(deps, caller, query, limit=limit, world=world, embedded=embedded)
            if query and embedded is not None
            else ([], None)
        ),
    )
    degraded = degraded or facts_degraded

    now = deps.clock.now() if params.include_expired else None
    # D25: remote callers read redacted facts and results; packed after, so budgets count them.
    candidates = [recall_fact(f, now) for f in shown_facts(caller, facts)]
    query_first = params.budget_policy == "query_first" and bool(query) and budget is not None
    packer = Packer(budget)
    order = ("results", "facts") if query_first else ("facts", "results")
    kept = pack(packer, {"facts": (candidates, _fact_cost), "results": (results, _result_cost)}, order)
    fact_items, result_items = kept["facts"], kept["results"]
    optional: dict[str, Any] = {**({"search_degraded": degraded} if degraded else {}), **packer.fields()}
    if params.budget_policy is not None:
        optional["budget_packing"] = packing_report(params.budget_policy, query, packer)
    result = RecallResult(
        protocol_version=PROTOCOL_VERSION, facts=fact_items, total=len(fact_items), results=result_items, **optional
    )
    notices: list[Notice] = []
    if _out_of_range(params.limit):
        notices.append(_clamped_notice(params.limit, limit))
    if degraded:
        notices.append(degraded_recall_notice(degraded))
    if query and not facts and not results:
        notices.append(empty_retrieval_notice(degraded))
    return Outcome(result.wire(), notices)


DESCRIPTION = (
    "MEMORY VERB (v1): Retrieve saved facts and, with `query`, budget-packed page snippets. "
    'Use it for "what do we know about X": recall(query="Acme pricing", budget_tokens=1500) or '
    'recall(entity="companies/acme"). Facts use entity or else session_id, each ANDed with since; '
    "`limit` caps each arm (default 50, max 100). Each result says why it matched (`evidence`) and "
    "whether a page already exists (`create_safety`). `search_degraded` means keyword-only search: "
    "an empty degraded result is not proof there are no notes. Forget a fact with its `fact_id`."
)

SPEC = read_tool(TOOL, DESCRIPTION, RecallParams, RecallResult, run, surface="verbs")
