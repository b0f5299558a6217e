"""`delta(since?, session_id?, cursor?, since_slug?, since_page_seq?, since_fact_seq?, entities?,
budget_tokens?, include_private?)` — what changed since a cursor, for heartbeats (docs/protocol.md: delta; D10, D14).
At-least-once under any interleaving of writers and wakes, never silent loss.

Public API: `DeltaParams`, `DeltaResult`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`.
`run` is its steps, in `fleetmem.memory.delta_steps`; the wire models and the answer are
`delta_answer`. The session cursors live in `fleetmem.memory.delta_cursor`, the budget (what the
text shows, the first item's cut) in `delta_budget`, change and expiry positions in
`delta_positions`, and the one-timeline read of a reference client in `delta_reference`.

Rules:
- Input: `since` (ISO 8601, must parse; echoed normalized `…T…:…:….000Z`) and/or `session_id`
  (clipped to 200 chars); neither -> invalid_params. With `since`: `since_slug` resumes a (updated_at,
  slug) keyset position, and `since_page_seq` / `since_fact_seq` (integers >= 0, from
  `next_cursor.page_seq` / `next_cursor.fact_seq`) resume the EXACT positions. An explicit `since`
  wins over the session's cursor.
- Change sequences (D14): every page write and every new fact gets the tenant's next page / fact
  change number inside its own write transaction (on DynamoDB the write commits with a pending
  number and the store numbers it when a reader asks for positions, D21), so once a reader has
  seen number N, every change below N has committed and every later number is above N. Pages and
  facts are each listed by change number strictly after their own position, ascending, 50 per
  call (51 fetched to detect overflow); facts active only. A position not given (a reference client passing only since /
  since_slug, or a session cursor from before change numbers) is derived from the timestamp:
  min(current counter, smallest number of an item after it - 1) — `change_floor`.
- Session cursors are keyed (tenant, cursor_client(caller), session_id): a trusted-local caller
  uses its client id (the CLI's is "local"); a remote caller uses its authenticated client id, or
  the shared "remote" namespace when it has none — and never "local", which is reserved for the
  trusted lane. First wake (or a wake after 7 idle days): the cursor is created at now (its change
  positions at the current counters) and the delta is empty (`since` = now, `has_more: false`).
- Budget (`delta_budget.pack_delta`): the budget is spent on `text`, frame included (D16). The
  pending items in the order their positions pass them (the page arm, the fact arm, TTL expiries;
  then thread events) are delivered as the longest prefix the text can show within the budget,
  and the JSON lists exactly that prefix: every delivered item is in the wake's text, and no
  position passes an item the text left out. When not even the first pending page or fact fits
  whole it is delivered cut to fit (`truncated: true`, the same cut in both). When the frame
  leaves no room for it, nothing is delivered and the `delta_incomplete` notice's fix is the same
  call with the smallest budget that shows it. `budget_used` = cost of the text; `dropped_count`
  = items and threads it left out. `has_more` = page or fact fetch overflow, the deadline, or any
  item left out (threads left out do not count: they are read again from `since`).
- Fact items: `{id, fact_id, fact, kind, entity_slug, provenance, visibility, created_at,
  valid_until}` (`fact` as in recall).
- Retractions (D19), `retracted[]`: a forgotten or superseded fact takes the next fact change
  number in its write and is listed in the fact arm as `{kind: "fact", id, reason, at,
  superseded_by?}`; a deleted page's tombstone is numbered in the page sequence and listed in the
  page arm as `{kind: "page", slug, reason: "deleted", at}`; a TTL expiry (read-time, no write) is
  listed after the fact arm by (valid_until, seq) after its own position `expiry` ("<ISO>#<seq>",
  in the session cursor and next_cursor; `since_expiry`; absent: from since). Each costs its line
  in the text. Calls from a bare since list none of them.
- A stateless call without both exact positions (a reference client: since + since_slug only)
  reads one timeline (`_reference_delta`): pages and facts merged in time order, a prefix within
  the budget, next_cursor.since/slug = the last delivered item ("#f<seq>" inside a millisecond of
  facts), page_seq / fact_seq the change floors of that position.
- `next_cursor` = `{since, slug}` of the last DELIVERED page (none delivered -> the effective
  since/slug; the reference wire) plus `page_seq` / `fact_seq`: the change numbers delivered up to
  (the exact cursor; pass them back as since_page_seq / since_fact_seq).
- Session advance (conditional write on the cursor version; on a lost race re-read and retry once;
  no position ever moves backwards): page_seq to the last delivered page, fact_seq to the last
  delivered fact, each only past what was DELIVERED; since/slug to the last delivered page, or to
  now − 2 s when nothing was pending (the threads arm filters by it). A wake that delivered
  nothing but held something back (only the deadline can now) moves nothing and carries a
  `delta_incomplete` notice (kind degraded) whose fix says wait and retry the same call; from the
  3rd consecutive incomplete wake of a session the fix carries no call (`next: report`). An
  explicit `since` on a session moves an arm's position only when it read from at or before it.
- Opaque cursor (D33, `delta_resume`): `next_cursor.cursor` packs every next_cursor position;
  `cursor` alone resumes exactly (a call from it is the call with every since_* field). `since`
  replaces it; since_* without since beside it is invalid_params; with session_id it wins like
  since. `cursor_arms` = each arm's start and next point. A first wake adds `empty_retrieval`.
- Threads: open-thread events (commitments, timeline entries) dated after the effective `since`
  for up to 8 `entities` (comma-separated, like context_pack).
- Visibility: world-only unless trusted-local AND include_private (as context_pack).
- D10: past `ctx.deadline_at` the remaining arms are skipped, `degraded_reason` says so, the
  skipped arms count as dropped (has_more) and their positions do not move (no silent loss).
"""

from __future__ import annotations

from fleetmem.errors import Outcome
from fleetmem.memory import delta_steps as steps
from fleetmem.memory.delta_answer import DeltaPage, DeltaResult, NextCursor, Retraction, answer
from fleetmem.memory.delta_params import DeltaParams
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller
from fleetmem.ports import CallContext, Deps

TOOL = "delta"
__all__ = ["DeltaPage", "DeltaParams", "DeltaResult", "NextCursor", "Retraction", "run"]


def run(deps: Deps, caller: Caller, params: DeltaParams, ctx: CallContext) -> Outcome:
    ask = steps.parse(deps, caller, params)
    cursor, first_wake = steps.read_session(deps, ask)
    if first_wake is not None:
        return first_wake
    start = steps.start_from(ask, cursor)
    if ask.session_id is None and (start.page_pos is None or start.fact_pos is None):
        return steps.reference_delta(deps, ask, ctx, start)
    pos = steps.exact_positions(deps, ask, start)
    changes = steps.read_changes(deps, ask, ctx, pos)
    delivery = steps.deliver(ask, pos, changes)
    notices = steps.advance_session(deps, ask, pos, cursor, changes, delivery)
    return answer(steps.delivered_answer(ask, pos, changes, delivery, notices))


DESCRIPTION = (
    "MEMORY VERB (v1): delta(session_id | since, budget_tokens?) returns what changed since your "
    "last wake: pages updated (oldest first), facts recorded, and open-thread events for `entities`, "
    "plus a ready-to-inject `text`. Call it on every HEARTBEAT / periodic wake with a stable "
    "session_id — the server keeps your cursor, delivery is at-least-once, and has_more=true means "
    "call again. The first wake of a session only sets the cursor (empty delta). Stateless: pass "
    "next_cursor.cursor back as cursor (exact on both arms), or since (+ since_slug). Example: "
    '{"session_id": "ops-bot-heartbeat", "budget_tokens": 1500}. Stateless callers may instead pass '
    "back every next_cursor field (page_seq as since_page_seq, fact_seq as since_fact_seq, expiry as "
    "since_expiry) for exact resumption. "
    "retracted[] lists facts forgotten, superseded or expired and pages deleted since: drop "
    "them from what you kept. Zero LLM, sub-second."
)

SPEC = read_tool(TOOL, DESCRIPTION, DeltaParams, DeltaResult, run, surface="verbs")
