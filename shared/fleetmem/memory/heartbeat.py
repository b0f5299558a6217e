"""The heartbeat's policy (docs/protocol.md: delta): how big one scheduled delivery may be and where the
session cursor goes after a wake. Pure functions; the Lambda glue runs them
(`fleetmem.transport.aws_lambda.heartbeat`).

- Budget: a wake asks `delta` for at most `MAX_BUDGET_TOKENS` (default `DEFAULT_BUDGET_TOKENS`).
  A token is ~4 characters and the delta carries its items twice (the list and the rendered
  `text`), so 20,000 tokens stay well under the 256 KB a single SQS message or EventBridge entry
  may hold. The serialized size is still measured before sending: a delivery over the limit is
  retried with half the budget (delta then hands back fewer items and a `next_cursor` that
  covers exactly those), and at `MIN_BUDGET_TOKENS` the message is cut to item heads
  (`truncate`) — the cursor never sticks on a delta too large to send.
- Cursor: pages delivered -> to the delivered `next_cursor` (pages carry the cursor), and so do
  facts delivered to a cursor without exact positions (delta then reads from since + slug alone,
  and its `next_cursor` moves past exactly what it delivered); only facts (at exact positions) or
  threads delivered -> now minus `IN_FLIGHT_MARGIN`, like an empty wake;
  nothing delivered but something held back -> stays, streak + 1; nothing at all -> now minus
  `IN_FLIGHT_MARGIN` (covers writes in flight).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fleetmem.models import Cursor
from fleetmem.timefmt import iso, parse_iso

DEFAULT_BUDGET_TOKENS = 4_000
MAX_BUDGET_TOKENS = 20_000
MIN_BUDGET_TOKENS = 250
#: Nothing delivered and nothing dropped: the cursor moves to now minus this.
IN_FLIGHT_MARGIN = timedelta(seconds=2)
#: Characters of a fact's text kept when a delivery is cut to heads.
HEAD_CHARS = 200


def wake_budget(requested: Any) -> int:
    """The budget one wake asks delta for: the schedule's `budget_tokens`, within the bound."""
    try:
        wanted = int(requested) if requested else DEFAULT_BUDGET_TOKENS
    except (TypeError, ValueError):
        wanted = DEFAULT_BUDGET_TOKENS
    return max(MIN_BUDGET_TOKENS, min(wanted, MAX_BUDGET_TOKENS))


def smaller_budget(budget: int) -> int | None:
    """The next budget to try when a delivery was too large, or None at the floor."""
    return budget // 2 if budget > MIN_BUDGET_TOKENS and budget // 2 >= MIN_BUDGET_TOKENS else None


def has_changes(body: dict[str, Any]) -> bool:
    return bool(body.get("pages") or body.get("facts") or body.get("threads") or body.get("retracted"))


def truncate(body: dict[str, Any], *, heads: bool = True) -> dict[str, Any]:
    """The delta cut down to fit one message: item heads (page slug/title/updated_at, fact id and
    the first `HEAD_CHARS` of its text), or with `heads=False` only the counts. The receiver
    fetches the full items with get_page / recall; `truncated: true` says so. `cursor_arms` (where
    each arm started, an audit trail) is left out; `next_cursor` stays, so the receiver can resume."""
    pages = [{k: p.get(k) for k in ("slug", "title", "updated_at")} for p in body.get("pages") or []]
    facts = [{"id": f.get("id"), "text": str(f.get("text") or "")[:HEAD_CHARS]} for f in body.get("facts") or []]
    out = {k: v for k, v in body.items() if k not in {"pages", "facts", "threads", "text", "cursor_arms"}}
    out.update(
        truncated=True,
        counts={"pages": len(pages), "facts": len(facts), "threads": len(body.get("threads") or [])},
        pages=pages if heads else [],
        facts=facts if heads else [],
        threads=[],
        text="",
    )
    return out


def advance(cursor: Cursor, body: dict[str, Any], *, delivered: bool, now: datetime) -> Cursor:
    """The session cursor after a wake that delivered (or not) this delta body."""
    from_since = cursor.page_seq is None or cursor.fact_seq is None  # delta read from since + slug alone
    if delivered and (body.get("pages") or (from_since and body.get("facts"))):
        nxt = body.get("next_cursor") or {}
        since, slug, streak = parse_iso(nxt["since"]), nxt.get("slug") or "", 0
    elif not delivered and body.get("has_more"):
        since, slug, streak = cursor.since, cursor.slug, cursor.incomplete_streak + 1
    else:
        since, slug, streak = max(cursor.since, now - IN_FLIGHT_MARGIN), cursor.slug, 0
        if since != cursor.since:
            slug = ""
    update: dict[str, Any] = {"since": since, "slug": slug, "touched_at": now, "incomplete_streak": streak}
    if delivered:
        # D14: the exact positions move past what this delivery carried (pages and facts alike).
        nxt = body.get("next_cursor") or {}
        update.update({k: nxt[k] for k in ("page_seq", "fact_seq", "expiry") if nxt.get(k) is not None})
    return cursor.model_copy(update=update)


def delta_arguments(cursor: Cursor, budget_tokens: int) -> dict[str, Any]:
    """The stateless delta call of one wake: the cursor's keyset position and, where known, its
    exact change positions (D14), so no page or fact is skipped whatever the commit order."""
    args: dict[str, Any] = {
        "since": iso(cursor.since),
        "since_slug": cursor.slug or None,
        "budget_tokens": budget_tokens,
    }
    if cursor.page_seq is not None:
        args["since_page_seq"] = cursor.page_seq
    if cursor.fact_seq is not None:
        args["since_fact_seq"] = cursor.fact_seq
    if cursor.expiry is not None:
        args["since_expiry"] = cursor.expiry
    return args
