"""`get_page(slug)` — read one page (full surface, read scope).

Public API: `GetPageParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered),
`page_not_found(slug) -> VerbError`, `visible_page(deps, caller, slug) -> Page | None`.

Response `{slug, title, type, aliases, summary, visibility, content, links, timeline, created_at,
updated_at, protocol_version}`. `content` is the frontmatter re-rendered (title, type, aliases,
summary, visibility, non-mention links, timeline, then the other stored keys) + the body, so
`put_page(slug, content)` round-trips. For a remote caller a private page is `not_found` exactly
like a missing one, and private content (`pagefmt.strip_private`) is stripped from the body, the
summary, the timeline and link contexts; links to private pages are hidden. For a remote caller the
whole `content` (frontmatter and body), the summary, timeline texts and link contexts are also
credential-redacted (`<REDACTED:pattern>`,
D25).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from fleetmem.errors import Fix, Outcome, VerbError
from fleetmem.memory.common import too_long
from fleetmem.memory.pagefmt import render_page_content, strip_private
from fleetmem.memory.params import Params
from fleetmem.memory.redaction import redact
from fleetmem.memory.registry import read_tool
from fleetmem.memory.slugs import is_path_like, last_segment, path_slug_error, slug_size_problem
from fleetmem.models import Caller, Page, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import MENTION_LINK_TYPE, PROTOCOL_VERSION, Visibility
from fleetmem.timefmt import iso

TOOL = "get_page"


class GetPageParams(Params):
    slug: str = Field(description='Page slug, e.g. "people/alice-example".')


def page_not_found(slug: str) -> VerbError:
    why = "No page with this slug exists (slugs are exact; names and aliases resolve via entity)."
    name = last_segment(slug.strip()) or slug
    return VerbError(
        "not_found",
        f"No page {slug!r}.",
        f"Problem: there is no page {slug!r}. Cause: {why} Fix: resolve the name with entity "
        f'{{"name": {name!r}}}, which returns the exact slug or near misses.',
        why=why,
        fix=Fix(why=why, mcp={"tool": "entity", "arguments": {"name": name}}),
        klass="caller",
    )


def visible_page(deps: Deps, caller: Caller, slug: str) -> Page | None:
    """The page a caller may see; a slug over the size limits (D16) or a path ("../x") is `invalid_params`."""
    if is_path_like(slug):
        raise path_slug_error("slug", slug)
    problem = slug_size_problem(slug.strip())
    if problem:
        raise too_long(
            f"slug is too long: {problem}.",
            problem=f"No page can have this slug: {problem}.",
            cause="page slugs have size limits, so an over-long slug names nothing.",
            instead="pass the exact slug of an existing page (list_pages or entity(name) show them).",
        )
    page = deps.pages.get(caller.tenant, slug.strip())
    if page is None or (caller.remote and page.visibility != "world"):
        return None
    return page


class PageLink(Wire):
    type: str
    target: str
    context: str | None


class PageTimelineEntry(Wire):
    date: str
    text: str


class GetPageResult(Wire):
    slug: str
    title: str
    type: str | None
    aliases: list[str]
    summary: str | None
    visibility: Visibility
    content: str  # frontmatter + body: put_page accepts it back
    links: list[PageLink]
    timeline: list[PageTimelineEntry]
    created_at: str
    updated_at: str
    protocol_version: int


def _clean(text: str | None, world_only: bool) -> str | None:
    if text is None or not world_only:
        return text
    return redact(" ".join(strip_private(text).split())) or None


def page_view(deps: Deps, caller: Caller, page: Page) -> dict[str, Any]:
    world_only = caller.remote
    links = list(page.links)
    if world_only and links:
        heads = deps.pages.heads(caller.tenant, [x.target for x in links])
        private = {h.slug for h in heads if h.visibility != "world"}
        links = [x for x in links if x.target not in private]
    link_rows = [{"type": x.type, "target": x.target, "context": _clean(x.context, world_only)} for x in links]
    timeline = [{"date": t.date, "text": text} for t in page.timeline if (text := _clean(t.text, world_only))]
    summary = _clean(page.summary, world_only)
    body = strip_private(page.body) if world_only else page.body
    meta: dict[str, Any] = {"title": page.title}
    if page.type:
        meta["type"] = page.type
    if page.aliases:
        meta["aliases"] = list(page.aliases)
    if summary:
        meta["summary"] = summary
    meta["visibility"] = page.visibility
    explicit = [row for row in link_rows if row["type"] != MENTION_LINK_TYPE]
    if explicit:
        meta["links"] = [{k: v for k, v in row.items() if v is not None} for row in explicit]
    if timeline:
        meta["timeline"] = timeline
    for key, value in page.frontmatter.items():
        meta.setdefault(key, value)
    content = render_page_content(meta, body)
    return {
        "slug": page.slug,
        "title": page.title,
        "type": page.type,
        "aliases": list(page.aliases),
        "summary": summary,
        "visibility": page.visibility,
        "content": redact(content) if world_only else content,
        "links": link_rows,
        "timeline": timeline,
        "created_at": iso(page.created_at),
        "updated_at": iso(page.updated_at),
        "protocol_version": PROTOCOL_VERSION,
    }


def run(deps: Deps, caller: Caller, params: GetPageParams, ctx: CallContext) -> Outcome:
    page = visible_page(deps, caller, params.slug or "")
    if page is None:
        raise page_not_found(params.slug or "")
    return Outcome(body=GetPageResult.model_validate(page_view(deps, caller, page)).model_dump())


DESCRIPTION = (
    "Read one page by exact slug: title, type, aliases, summary, links, timeline and the markdown "
    '`content` (frontmatter + body; put_page accepts it back). Example: {"slug": '
    '"people/alice-example"}. Unknown slug -> not_found; resolve names with entity first.'
)

SPEC = read_tool(TOOL, DESCRIPTION, GetPageParams, GetPageResult, run)
