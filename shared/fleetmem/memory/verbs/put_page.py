"""`put_page(slug, content, …)` — create or replace a page (full surface, write scope, D2 idempotent).

Public API: `PutPageParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`,
`index_page(deps, page) -> bool`, `unindex_page(deps, tenant, slug) -> bool`. `run` is its steps, in
`fleetmem.memory.put_page_steps`; the size limits are `fleetmem.memory.page_limits`.

- `content` is markdown with optional YAML frontmatter (`pagefmt.parse_page_content`): title, type,
  aliases, summary, visibility (world|private), links [{type, target, context}], timeline
  [{date, text}]; other keys are kept verbatim in `Page.frontmatter`. Explicit arguments of the
  same names override the frontmatter. `[[slug]]` in the body become `mentions` links.
- `slug` must already be in slugified form (`slugs.SLUG_GRAMMAR`: lowercase letters and digits of any
  script and "-" per "/" segment); otherwise invalid_params whose fix carries the slugified slug. A
  path ("." or ".." segment, backslash) is invalid_params WITHOUT a guessed slug. Link targets
  (frontmatter links and `[[...]]` mentions) are slugified; a target that is a path is refused the
  same way (never stored as the folded "x" of "../../x").
- title: argument > frontmatter > first `# ` heading > the last slug segment.
- Size limits (D16), checked before anything is stored: slug <= 200 characters with each segment
  <= 100; a given title (argument or frontmatter) <= 300 (a title taken from the first heading is
  clipped to 300 instead); each alias <= 200 and at most 50 aliases. Over -> invalid_params whose
  fix has no runnable step (a shortened name is a different name) and says what to do instead.
- Body larger than 350 KB (UTF-8), or a page larger than `PAGE_STORED_MAX_BYTES` (384 KB) as stored
  (`stored_bytes`: the body plus every other field re-serialized) -> invalid_params; `content`
  itself larger than `PAGE_CONTENT_MAX_BYTES` (1 MiB, UTF-8) is refused the same way before it is
  parsed. Bad YAML, or
  YAML that uses an alias (`pagefmt`: refused before it expands) -> invalid_params with no run-fix
  (only the writer can correct it).
- status: created | updated | unchanged (unchanged writes nothing, so delta does not re-deliver).
  A remote caller may write a private page but cannot read it back, and never replaces a page it
  cannot see: over a stored private page its put is refused (`invalid_params`, detail.reason
  "slug_taken", nothing of the page told) unless expected_updated_at names a time, which answers as
  for a missing page (stale_version, `stored_updated_at` null). A remote write without
  expected_updated_at is still conditional in the store, on the version it was decided on ("" when
  none), so a page made private between the read and the write is not overwritten either; when
  other writers win that race `_WRITE_ROUNDS` times the answer is `unavailable` (retryable). The
  trusted local CLI writes unconditionally.
- Write-through search (`deps.search.write_through`): old chunks deleted, `indexing.docs_for_page`
  embedded (`indexing.embed_docs`) and upserted -> `search_state: current`; otherwise `pending`.
- `expected_updated_at` (optional): the updated_at get_page returned, or "" = the page must not exist
  yet. Checked by the store in the same atomic step as the write (`PageStore.put`); a mismatch
  writes nothing -> invalid_params, detail.reason "stale_version" with `stored_updated_at`, whose
  fix says: get_page again, merge, put again with the new updated_at. Checked before "unchanged".
- Audit event "put_page". Response `{slug, status, search_state, protocol_version}`.
"""

from __future__ import annotations

from typing import Any, Literal

from fleetmem.errors import Outcome, caller_error
from fleetmem.memory import put_page_steps as steps
from fleetmem.memory.page_limits import PAGE_STORED_MAX_BYTES, check_body_size, check_content_size, stored_bytes
from fleetmem.memory.pagefmt import PageFormatError, parse_page_content
from fleetmem.memory.put_page_params import PutPageParams
from fleetmem.memory.put_page_steps import index_page, unindex_page
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import write_tool
from fleetmem.models import Caller
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SearchState

TOOL = "put_page"
__all__ = [
    "PAGE_STORED_MAX_BYTES",
    "PutPageParams",
    "PutPageResult",
    "index_page",
    "run",
    "stored_bytes",
    "unindex_page",
]


class PutPageResult(ReceiptFields):  # D22: the receipt fields (optional)
    slug: str
    status: Literal["created", "updated", "unchanged"]
    search_state: SearchState
    protocol_version: int
    idempotent_replay: bool | None = None


def run(deps: Deps, caller: Caller, params: PutPageParams, ctx: CallContext) -> Outcome:
    slug = steps.check_slug(params)
    meta, body = _read_content(slug, params.content or "")
    fields = steps.page_fields(params, slug, meta, body)
    expected = steps.expected_version(params)
    draft = steps.draft_page(deps, caller, slug, body, fields)
    written = steps.write(deps, caller, params, ctx, draft, expected)
    if written.status == "unchanged":
        return _answer(slug, "unchanged", current=True)
    steps.audit(deps, caller, written)
    return _answer(slug, written.status, current=index_page(deps, written.page))


def _read_content(slug: str, content: str) -> tuple[dict[str, Any], str]:
    """The frontmatter and the body, each within its size limit."""
    check_content_size(slug, content)
    try:
        meta, body = parse_page_content(content)
    except PageFormatError as exc:
        # No run-fix: dropping the frontmatter would silently lose the title, aliases, links and
        # visibility it holds (a private page would be stored world-visible). Only the writer can
        # correct the YAML.
        cause = "frontmatter must be a YAML mapping (key: value lines) between '---' lines."
        instead = (
            f"Correct the YAML at the place named ({exc}) and put the page again; "
            + (exc.instead or "quote values that hold ':' or start with '[', '{', '*', '&' or '#'.")
            + " Title, aliases, type, summary and visibility may also be passed as arguments instead of "
            "frontmatter."
        )
        raise caller_error(
            f"The page frontmatter of {slug} could not be read: {exc}.",
            problem=f"The YAML frontmatter of {slug} does not parse.",
            cause=cause,
            instead=instead,
            field="content",
            reason="frontmatter_yaml",
        ) from None
    check_body_size(slug, body)
    return meta, body


def _answer(slug: str, status: Literal["created", "updated", "unchanged"], *, current: bool) -> Outcome:
    return Outcome(
        body={
            "slug": slug,
            "status": status,
            "search_state": "current" if current else "pending",
            "protocol_version": PROTOCOL_VERSION,
        }
    )


DESCRIPTION = (
    "Create or replace a page (a person, company, project or topic) from markdown with optional YAML "
    'frontmatter. Example: {"slug": "people/alice-example", "content": "---\\ntitle: Alice '
    "Example\\ntype: person\\naliases: [Alice]\\n---\\nAlice runs payments at "
    '[[companies/acme-example]]."}. Explicit title/type/aliases/links/timeline/visibility/summary '
    "arguments override the frontmatter. "
    "status says created | updated | unchanged."
)

SPEC = write_tool(
    TOOL,
    DESCRIPTION,
    PutPageParams,
    PutPageResult,
    run,
    annotations={"idempotentHint": True},
    idempotency=True,
)
